// What one HTTP request to a provider came to: the provider classifies it, the chain decides
// from it whether and where to retry, and the breaker, key ring and token budget each read it.
import type { Answer } from '../../contract/index.js';

/** What one HTTP request came to. */
export type Outcome =
  | { kind: 'ok'; completion: Answer; ms: number }
  /**
   * Retryable and counted: network error, timeout, 5xx, unusable 200. Counts against the breaker.
   * `unsent`: a network error before any connection (the upstream never saw the request).
   */
  | { kind: 'retry'; timeout: boolean; status?: number; unsent?: true; message: string }
  /** 429: retried without using an attempt; the key cools for retryAfterMs. */
  | { kind: 'rate_limited'; retryAfterMs: number | undefined; message: string }
  /** A 429 for an exhausted quota, which no wait clears: the key is set aside. */
  | { kind: 'bad_key'; status: number; message: string }
  /** 401/403: about the key or about the request (its model); a probe of the key tells which. */
  | { kind: 'key_refused'; status: number; message: string }
  /**
   * Caused by the request itself: a 400/404/413/422 about it, or a request that cannot be sent
   * (a header or body undici refuses; no status then). It fails alone: no retry, no other
   * provider, no breaker event, no key failure.
   */
  | { kind: 'invalid'; status?: number; message: string }
  /** Any other status: the request itself is refused, retrying cannot help. */
  | { kind: 'fatal'; status: number; message: string };
