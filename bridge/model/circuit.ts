// A provider's circuit as its breaker and the store that keeps it speak of it: the state, the
// settings, and the answers to "may a call go now?" and "here is how one went".

export type CircuitState = 'closed' | 'open' | 'half-open';

export interface BreakerConfig {
  consecutiveFailures: number;
  /** 0 < errorRate <= 1. */
  errorRate: number;
  windowMs: number;
  minCalls: number;
  /** BREAKER_COOLDOWN_MS. */
  cooldownMs: number;
  /** How long a granted probe may run before another caller may probe (its holder may have died). */
  probeLeaseMs: number;
}

/** The store's answer to "may a call go to this provider now?". */
export type Acquired =
  | {
      allowed: true;
      state: CircuitState;
      /** Set when this caller holds the half-open probe: pass it back to record/release. */
      probe: string | undefined;
      /** The state before, when this acquire changed it (open → half-open). */
      from: CircuitState | undefined;
    }
  | { allowed: false; state: 'open' | 'half-open'; retryAt: number };

export interface Recorded {
  state: CircuitState;
  /** The state before, when this record changed it. */
  from: CircuitState | undefined;
  /** Why it opened or closed. */
  reason: string | undefined;
  /** While open: until when. */
  openUntil: number | undefined;
}
