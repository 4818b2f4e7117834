// The upstream layer's entry points. The scheduler only knows `UpstreamCall` →
// `UpstreamResult` (or a BridgeError with a contract code); what happens in between — the
// provider chain, breakers, key rotation, retries, 429s, deadlines — is chain.ts (one call's
// walk: chain-call.ts), and one HTTP attempt against one provider is provider.ts.
import type { BackoffOptions } from './backoff.js';
import { ProviderChain } from './chain.js';
import type { Logger } from '../logger.js';

export type { StreamSink, UpstreamCall, UpstreamResult } from './call.js';
export { ProviderChain, type ProviderChainOptions, type ProviderHealth } from './chain.js';

export interface UpstreamClientOptions {
  /** e.g. `http://127.0.0.1:8080/v1`; the path prefix is kept: POST {baseUrl}/chat/completions (or /embeddings). */
  baseUrl: string;
  /** May be empty: then no Authorization header is sent. */
  apiKeys: string[];
  /** Per attempt; covers waiting for a connection, connect, headers and body. */
  timeoutMs: number;
  maxAttempts: number;
  maxRateLimitedRetries: number;
  backoff?: BackoffOptions;
  /** Sockets kept to the upstream; pass MAX_CONCURRENCY (default 32, as in the contract). */
  connections?: number;
  /** Longest Retry-After honoured before retrying (default 60 s); a larger one is clamped. */
  maxRetryAfterMs?: number;
  /** Jitter source for backoff (default Math.random); injectable so tests can pin delays. */
  random?: () => number;
  logger: Logger;
}

/**
 * One upstream, no circuit breaker: a chain of a single provider named `primary`. For tools
 * and tests that talk to one OpenAI-compatible endpoint; the bridge itself builds a
 * ProviderChain from UPSTREAM_*, FALLBACK_* and CONFIG_FILE (app.ts).
 */
export class UpstreamClient extends ProviderChain {
  constructor(opts: UpstreamClientOptions) {
    super({
      providers: [{ name: 'primary', baseUrl: opts.baseUrl, apiKeys: opts.apiKeys, timeoutMs: opts.timeoutMs, connections: opts.connections }],
      maxAttempts: opts.maxAttempts,
      maxRateLimitedRetries: opts.maxRateLimitedRetries,
      ...(opts.backoff ? { backoff: opts.backoff } : {}),
      ...(opts.maxRetryAfterMs !== undefined ? { maxRetryAfterMs: opts.maxRetryAfterMs } : {}),
      ...(opts.random ? { random: opts.random } : {}),
      logger: opts.logger,
    });
  }
}
