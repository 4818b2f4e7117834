// The contract's error codes: the `error.code` of every error reply, and the one exit-2
// error an operator sees for a bad variable.
import { z } from 'zod';

export const ERROR_CODES = [
  'invalid_request',
  'payload_too_large',
  'rate_limited',
  'queue_full',
  'expired',
  'upstream_error',
  'upstream_timeout',
  'unavailable',
  'internal',
] as const;
export const ErrorCodeSchema = z.enum(ERROR_CODES);
export type ErrorCode = z.infer<typeof ErrorCodeSchema>;

/** A bad configuration variable: the process exits 2 with `VARIABLE: problem`. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`${variable}: ${problem}`);
  }
}
