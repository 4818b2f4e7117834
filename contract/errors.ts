// Every error type of the project, in one catalogue. The contract's error codes are the
// `error.code` of every error reply (BridgeError carries one); the other types never reach
// a device: each says who sees it (an operator at start, an HTTP client, a CLI user).
import { z } from 'zod';

export const ERROR_CODES = [
  'invalid_request',
  'payload_too_large',
  'rate_limited',
  'queue_full',
  'budget_exceeded',
  'expired',
  'upstream_error',
  'upstream_timeout',
  'invalid_output',
  'unavailable',
  'internal',
] as const;
export const ErrorCodeSchema = z.enum(ERROR_CODES);
export type ErrorCode = z.infer<typeof ErrorCodeSchema>;

/** An error that carries a contract error code; the one type the pipeline turns into replies. */
export class BridgeError extends Error {
  override readonly name = 'BridgeError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

/** Anything thrown becomes a contract code; an unknown error is a bug, so `internal`. */
export function toBridgeError(err: unknown): BridgeError {
  if (err instanceof BridgeError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new BridgeError('internal', `internal error: ${message}`);
}

/**
 * The `queue_full` of an overload guard: `bridge overloaded (<cause>): retry later`, with a
 * retry_after_ms of 1 to 10 s (sooner is pointless against an overload, later a device gives up).
 */
export function overloaded(cause: string, retryAfterMs: number): BridgeError {
  // NaN (a window with no reading) would reach the device as null: the shortest wait instead.
  const ms = Number.isNaN(retryAfterMs) ? 0 : Math.round(retryAfterMs);
  return new BridgeError('queue_full', `bridge overloaded (${cause}): retry later`, Math.min(10_000, Math.max(1000, ms)));
}

/** One bad configuration variable, or a bad part of CONFIG_FILE. */
export interface ConfigProblem {
  variable: string;
  problem: string;
}

/** Bad configuration: the process exits 2 with one `VARIABLE: problem` line per problem. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly problems: ConfigProblem[];
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`${variable}: ${problem}`);
    this.problems = [{ variable, problem }];
  }

  /** Every problem at once; `variable` names the first. */
  static of(problems: ConfigProblem[]): ConfigError {
    const [first, ...rest] = problems;
    const error = new ConfigError(first?.variable ?? 'environment', first?.problem ?? 'invalid');
    error.problems.push(...rest);
    error.message = problems.map((p) => `${p.variable}: ${p.problem}`).join('\n');
    return error;
  }
}

/** A listener could not bind (a port in use, say); names the variable that fixes it. Exit 2. */
export class ListenError extends Error {
  override readonly name = 'ListenError';
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(message);
  }
}

/** An admin HTTP request refused: its status, message and headers are the response. */
export class HttpError extends Error {
  override readonly name = 'HttpError';
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** A job's lease was lost to another holder: the job is no longer ours, so it gets no reply from us. */
export class LeaseLost extends Error {
  override readonly name = 'LeaseLost';
}

/** A request body over the upstream simulator's limit: answered 413. */
export class PayloadTooLarge extends Error {
  override readonly name = 'PayloadTooLarge';
}

/** A bad command line; the message names the option. The CLI prints it with its usage and exits 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}
