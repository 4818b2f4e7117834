import type { ErrorCode, ErrorReply, Priority } from '../contract/index.js';

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

/**
 * The `queue_full` of an overload guard: `bridge overloaded (<cause>): retry later`, with a
 * retry_after_ms of 1 to 10 s (sooner is pointless against an overload, later a device gives up).
 */
export function overloaded(cause: string, retryAfterMs: number): BridgeError {
  return new BridgeError('queue_full', `bridge overloaded (${cause}): retry later`, Math.min(10_000, Math.max(1000, Math.round(retryAfterMs))));
}

/** Anything thrown becomes a contract code; an unknown error is a bug, so `internal`. */
export function toBridgeError(err: unknown): BridgeError {
  if (err instanceof BridgeError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new BridgeError('internal', `internal error: ${message}`);
}

export function errorReply(id: string | null, err: BridgeError, priority?: Priority): ErrorReply {
  const error: ErrorReply['error'] = { code: err.code, message: err.message };
  if (err.retryAfterMs !== undefined) error.retry_after_ms = Math.max(0, Math.ceil(err.retryAfterMs));
  return priority === undefined ? { id, ok: false, error } : { id, ok: false, priority, error };
}
