// When a call tries again, and after how long. Every attempt carries the call's one request id,
// so the bridge answers a repeat from its record and the upstream is never paid twice.
import { RETRYABLE_CODES } from './errors.js';

const BACKOFF_BASE_MS = 500;
const BACKOFF_CAP_MS = 30_000;
/** A bridge-given wait is stretched by up to this share, so a refused fleet does not return in step. */
const RETRY_AFTER_SPREAD = 0.2;

export type Retry = { retry: false } | { retry: true; waitMs: number };

/**
 * The wait before attempt `attempt + 1`, after attempt `attempt` (1-based) was refused with
 * `code`: `retryAfterMs` when the bridge gave one, else a jittered exponential backoff (half to
 * all of 0.5 s × 2^(attempt-1), at most 30 s). No retry for a code the request itself caused or
 * the bridge already settled.
 */
export function afterRefusal(code: string, attempt: number, retryAfterMs: number | undefined, random: () => number = Math.random): Retry {
  if (!RETRYABLE_CODES.has(code)) return { retry: false };
  if (retryAfterMs !== undefined && Number.isFinite(retryAfterMs) && retryAfterMs >= 0) {
    return { retry: true, waitMs: retryAfterMs * (1 + RETRY_AFTER_SPREAD * random()) };
  }
  const ceiling = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** Math.max(0, attempt - 1));
  return { retry: true, waitMs: ceiling / 2 + (ceiling / 2) * random() };
}
