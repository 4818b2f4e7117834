// A circuit breaker per provider (closed → open → half-open → closed).
//
// - closed: every call goes through. It opens after `consecutiveFailures` failed attempts in a
//   row, or when at least `minCalls` attempts ran within `windowMs` and `errorRate` of them failed.
// - open: no call goes to the provider (the chain tries the next one) until `cooldownMs`
//   (BREAKER_COOLDOWN_MS) has passed.
// - half-open: exactly ONE caller is granted a probe (a lease of `probeLeaseMs`, so a probe
//   whose holder died is granted again); every other caller skips the provider. The probe's
//   success closes the circuit, its failure opens it for another cool-down.
//
// A failure is a failed attempt that says something about the provider's health: network
// error, timeout, 5xx, unusable 200. Anything the provider answered properly (2xx, 4xx
// including 401/403/429) is a success: the provider is up.
//
// The state lives behind BreakerStore (breaker-port.ts): in memory for one instance
// (breaker-memory.ts), or in Redis (RedisBreakerStore, one Lua script, the same algorithm) so
// every instance shares it. Both take `now` from the caller, and a result is recorded only by
// the call it belongs to. In front of Redis, the Breaker keeps the common case (closed, calls
// succeeding) off the store: see SYNC_MS.
import type { Logger } from '../logger.js';
import type { Acquired, BreakerConfig, CircuitState, Recorded } from '../model/circuit.js';
import type { BreakerStore } from './breaker-port.js';
import { MemoryBreakerStore } from './breaker-memory.js';

export type { BreakerConfig, CircuitState } from '../model/circuit.js';
export type { BreakerStore } from './breaker-port.js';

/** A permit to send one attempt; pass it back with the result. */
export interface Permit {
  probe: string | undefined;
}

export type Admission = { ok: true; permit: Permit } | { ok: false; state: 'open' | 'half-open'; retryAt: number };

/** The permit of a call that holds no probe, and its admission: shared objects, never written. */
export const NO_PROBE: Permit = Object.freeze({ probe: undefined });
const ADMITTED: Admission = Object.freeze({ ok: true, permit: NO_PROBE });

/** How often a store failure is logged at most (per breaker). */
const STORE_ERROR_LOG_MS = 10_000;

/**
 * With a shared store: how long a closed circuit, as last seen from the store, is trusted
 * without asking again, and how long successes wait to be sent in one call. Asking the store
 * before and after every upstream call costs two round trips per call; this costs about one per
 * SYNC_MS. The price: an instance learns up to SYNC_MS late that another one opened the circuit,
 * and sends the provider the calls of that moment, which a cool-down of seconds dwarfs.
 */
export const SYNC_MS = 250;

/**
 * One provider's breaker as the chain uses it: asks the store, logs every state change it
 * sees (its own or, with Redis, another instance's), and keeps the last state seen so the
 * chain can guess without a round trip. If the store fails (Redis away) the breaker lets
 * calls through: it protects the upstream, it must not become an outage of its own.
 *
 * With a shared store the common case stays local: while the circuit was seen closed less
 * than `syncMs` ago, acquire asks nobody, and a success without a probe is only counted. The
 * successes go to the store in one record within `syncMs` (a timer, or sooner with the next
 * store call), and that answer refreshes the state seen. Everything else (a failure, a probe's
 * result, a result while not closed) goes to the store at once, carrying the pending successes
 * before it.
 */
export class Breaker {
  private seen: CircuitState = 'closed';
  /** While open or half-open with the probe out: when it may admit a call again (as last seen). */
  private blockedUntil = 0;
  private lastStoreErrorLog = 0;
  /** The clock at the store call that last answered. */
  private syncedAt = Number.NEGATIVE_INFINITY;
  /** Successes counted here and not sent yet (shared store only). */
  private pending = 0;
  private flushTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** The store when it is this instance's memory: then every step is answered at once, without a promise. */
  private readonly local: MemoryBreakerStore | undefined;

  constructor(
    readonly name: string,
    private readonly store: BreakerStore,
    readonly config: BreakerConfig,
    private readonly logger: Logger,
    private readonly clock: () => number = Date.now,
    private readonly syncMs = SYNC_MS,
  ) {
    this.local = store instanceof MemoryBreakerStore ? store : undefined;
  }

  /** The state last seen. */
  get state(): CircuitState {
    return this.seen;
  }

  /** A guess without a round trip: false while this instance knows the circuit to be open. */
  mayAdmit(now: number): boolean {
    return this.seen === 'closed' || now >= this.blockedUntil;
  }

  /**
   * acquire's answer when it needs no round trip (the memory store, or a shared one seen closed
   * lately); undefined when only acquire can tell.
   */
  admitNow(): Admission | undefined {
    const now = this.clock();
    if (this.knownClosed(now)) return ADMITTED;
    if (!this.local) return undefined;
    let acquired: Acquired;
    try {
      acquired = this.local.acquireNow(this.name, this.config, now);
    } catch (err) {
      this.storeFailed(err, 'acquire');
      return ADMITTED;
    }
    return this.admitted(acquired, now);
  }

  async acquire(): Promise<Admission> {
    const now = this.clock();
    // Sending the successes brings the state back too: when it is closed, no acquire is needed.
    if (this.pending > 0 && !this.knownClosed(now)) await this.flush(now);
    if (this.knownClosed(now)) return ADMITTED;
    let acquired: Acquired;
    try {
      acquired = await this.store.acquire(this.name, this.config, now);
    } catch (err) {
      this.storeFailed(err, 'acquire');
      return ADMITTED;
    }
    return this.admitted(acquired, now);
  }

  /** What the store's answer to an acquire means for the call. */
  private admitted(acquired: Acquired, now: number): Admission {
    this.syncedAt = now;
    if (!acquired.allowed) {
      this.blockedUntil = acquired.retryAt;
      this.observe(acquired.state, undefined, undefined);
      return { ok: false, state: acquired.state, retryAt: acquired.retryAt };
    }
    if (acquired.probe === undefined) {
      this.observe(acquired.state, acquired.from, undefined);
      return ADMITTED;
    }
    this.observe('half-open', acquired.from, undefined);
    this.logger.debug({ provider: this.name }, 'this call is the half-open probe');
    return { ok: true, permit: { probe: acquired.probe } };
  }

  /** Tells the store how the attempt went; a promise only when that is a round trip. */
  record(permit: Permit, ok: boolean, detail?: string): Promise<void> | undefined {
    if (this.store.shared && ok && permit.probe === undefined && this.seen === 'closed') {
      this.pending += 1;
      if (this.flushTimer === undefined && !this.closed) {
        this.flushTimer = setTimeout(() => {
          void this.flush(this.clock());
        }, this.syncMs);
        this.flushTimer.unref();
      }
      return undefined;
    }
    const now = this.clock();
    const successes = this.takePending();
    if (!this.local) return this.send(now, ok, permit.probe, successes, detail);
    let recorded: Recorded;
    try {
      recorded = this.local.recordNow(this.name, this.config, ok, permit.probe, now, successes);
    } catch (err) {
      this.storeFailed(err, 'record');
      return undefined;
    }
    this.learn(recorded, now, detail);
    return undefined;
  }

  /** Gives an unused probe back so another caller may probe at once. */
  async release(permit: Permit): Promise<void> {
    if (permit.probe === undefined) return;
    try {
      await this.store.release(this.name, this.config, permit.probe, this.clock());
    } catch (err) {
      this.storeFailed(err, 'release');
    }
  }

  /** Stops the flush timer. Successes not sent yet are dropped: they only fill the error-rate window. */
  close(): void {
    this.closed = true;
    this.takePending();
  }

  /** Closed as seen from the shared store less than syncMs ago. */
  private knownClosed(now: number): boolean {
    return this.store.shared && this.seen === 'closed' && now - this.syncedAt < this.syncMs;
  }

  private async flush(now: number): Promise<void> {
    const successes = this.takePending();
    // The latest success is the outcome recorded; the ones before it ride along.
    if (successes > 0) await this.send(now, true, undefined, successes - 1, undefined);
  }

  private takePending(): number {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const successes = this.pending;
    this.pending = 0;
    return successes;
  }

  private async send(now: number, ok: boolean, probe: string | undefined, successes: number, detail: string | undefined): Promise<void> {
    let recorded: Recorded;
    try {
      recorded = await this.store.record(this.name, this.config, ok, probe, now, successes);
    } catch (err) {
      this.storeFailed(err, 'record');
      return;
    }
    this.learn(recorded, now, detail);
  }

  /** What a recorded outcome tells of the circuit. */
  private learn(recorded: Recorded, now: number, detail: string | undefined): void {
    this.syncedAt = now;
    if (recorded.openUntil !== undefined) this.blockedUntil = recorded.openUntil;
    const reason = recorded.reason === undefined ? undefined : detail ? `${recorded.reason}; last: ${detail}` : recorded.reason;
    this.observe(recorded.state, recorded.from, reason);
  }

  private observe(state: CircuitState, from: CircuitState | undefined, reason: string | undefined): void {
    const previous = this.seen;
    this.seen = state;
    if (state === 'closed') this.blockedUntil = 0;
    if (from === undefined && previous === state) return;
    // `from` set: this instance made the change; otherwise another instance did (shared state).
    const fields = { provider: this.name, from: from ?? previous, by: from === undefined ? 'another instance' : 'this instance', reason };
    if (state === 'open') {
      this.logger.warn({ ...fields, cooldownMs: this.config.cooldownMs }, `circuit open: ${this.name} gets no calls for the cool-down`);
    } else if (state === 'half-open') {
      this.logger.info(fields, `circuit half-open: ${this.name} gets one probe call`);
    } else {
      this.logger.info(fields, `circuit closed: ${this.name} is back`);
    }
  }

  private storeFailed(err: unknown, step: string): void {
    const now = Date.now();
    if (now - this.lastStoreErrorLog < STORE_ERROR_LOG_MS) return;
    this.lastStoreErrorLog = now;
    this.logger.warn(
      { provider: this.name, step, err: err instanceof Error ? err.message : String(err) },
      'circuit breaker state unavailable; letting calls through',
    );
  }
}
