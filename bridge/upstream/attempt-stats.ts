// What one provider's HTTP attempts came to since they were last taken: the operator
// dashboard's calls per second, error rate, 429s and latency per provider.
import type { Outcome } from './outcome.js';

export interface AttemptCounts {
  calls: number;
  /**
   * Counted failures: timeouts, network errors, 5xx, unusable answers, exhausted quotas. Not
   * what a request may have caused (4xx, 401/403): one device must not colour the provider.
   */
  failures: number;
  /** 429 answers (not failures: the call moves to another key or waits). */
  rateLimited: number;
  /** Milliseconds of each answered attempt. */
  latenciesMs: number[];
}

/** Latencies kept per take: beyond this many, later ones are dropped (a take is a few seconds). */
const MAX_LATENCIES = 20_000;

export class AttemptStats {
  private counts: AttemptCounts = { calls: 0, failures: 0, rateLimited: 0, latenciesMs: [] };

  record(kind: Outcome['kind'], ms: number): void {
    const c = this.counts;
    c.calls += 1;
    if (kind === 'retry' || kind === 'bad_key') c.failures += 1;
    else if (kind === 'rate_limited') c.rateLimited += 1;
    else if (kind === 'ok' && c.latenciesMs.length < MAX_LATENCIES) c.latenciesMs.push(ms);
  }

  /** The counts since the last take; starts new ones. */
  take(): AttemptCounts {
    const taken = this.counts;
    this.counts = { calls: 0, failures: 0, rateLimited: 0, latenciesMs: [] };
    return taken;
  }
}
