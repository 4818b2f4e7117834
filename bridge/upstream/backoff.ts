// Retry timing for upstream calls: honour the upstream's Retry-After, otherwise exponential
// backoff with full jitter so a fleet of retries does not arrive in lock-step after an
// upstream hiccup.

export interface BackoffOptions {
  baseMs: number;
  maxMs: number;
}

/**
 * Delay before retry number `attempt` (1 = the first retry): uniform in
 * [0, min(maxMs, baseMs * 2^(attempt-1))). "Full jitter" spreads retries the most.
 */
export function backoffDelayMs(attempt: number, opts: BackoffOptions, random: () => number = Math.random): number {
  const n = Number.isFinite(attempt) && attempt >= 1 ? Math.floor(attempt) : 1;
  const base = Math.max(0, opts.baseMs);
  const cap = Math.max(0, Math.min(opts.maxMs, base * 2 ** (n - 1)));
  // Clamp the random source too: a custom one returning 1 (or garbage) must not exceed the cap.
  const r = Math.min(Math.max(random(), 0), 1);
  return Math.floor(r * cap);
}

const DELAY_SECONDS = /^-?\d+(\.\d+)?$/;
// Date.parse accepts almost anything ("1 2" is a date), so only try it on what looks like an
// HTTP-date: IMF-fixdate, RFC 850 and asctime all begin with a weekday name and hold hh:mm:ss.
const HTTP_DATE_SHAPE = /^(mon|tue|wed|thu|fri|sat|sun)[a-z]*,?\s.*\d{2}:\d{2}:\d{2}/i;

/**
 * A Retry-After header as milliseconds from `now`: delay-seconds or an HTTP-date (as undici's
 * retry handler reads it). Past dates and negative delays give 0; garbage gives undefined so
 * the caller falls back to its own backoff.
 */
export function parseRetryAfterMs(header: string | string[] | undefined, now: number = Date.now()): number | undefined {
  const raw = Array.isArray(header) ? header[0] : header;
  if (raw === undefined) return undefined;
  const value = raw.trim();
  if (value === '') return undefined;
  if (DELAY_SECONDS.test(value)) return Math.max(0, Math.round(Number(value) * 1000));
  if (!HTTP_DATE_SHAPE.test(value)) return undefined;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
