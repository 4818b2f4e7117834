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
// The state lives behind BreakerStore: in memory for one instance, or in Redis (one Lua script,
// store/lua/breaker.lua, the same algorithm) so every instance shares it. Both take `now` from
// the caller, and a result is recorded only by the call it belongs to. In front of Redis, the
// Breaker keeps the common case (closed, calls succeeding) off the store: see SYNC_MS.
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { LuaScript } from '../store/lua-script.js';
import { redisKeys } from '../store/redis-keys.js';

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

export interface BreakerStore {
  /** The state lives outside this process, shared by every instance: each call is a round trip. */
  readonly shared: boolean;
  acquire(name: string, config: BreakerConfig, now: number): Promise<Acquired>;
  /**
   * `successes`: earlier successes of calls that held no probe, applied before this outcome
   * (only while closed, as each on its own would be), so a batch keeps the order of outcomes.
   */
  record(
    name: string,
    config: BreakerConfig,
    ok: boolean,
    probe: string | undefined,
    now: number,
    successes?: number,
  ): Promise<Recorded>;
  /** Gives a probe back unused (the call stopped before its attempt ran). */
  release(name: string, config: BreakerConfig, probe: string, now: number): Promise<void>;
}

/** Buckets per window: the error rate is counted over the last BUCKETS buckets of windowMs/BUCKETS. */
const BUCKETS = 10;

const CODE_TO_STATE: Record<string, CircuitState> = { c: 'closed', o: 'open', h: 'half-open' };
const fromCode = (code: string | undefined): CircuitState | undefined => (code ? CODE_TO_STATE[code] : undefined);

function tripReason(config: BreakerConfig, consecutive: number, calls: number, failed: number): string | undefined {
  if (consecutive >= config.consecutiveFailures) return `${consecutive} consecutive failures`;
  if (calls >= config.minCalls && failed / calls >= config.errorRate) {
    return `${Math.floor((failed * 100) / calls)}% of ${calls} calls failed within ${config.windowMs} ms`;
  }
  return undefined;
}

interface MemoryCircuit {
  st: 'c' | 'o' | 'h';
  until: number;
  probe: string;
  probeUntil: number;
  fails: number;
  gen: number;
  /** bucket index → [calls, failed] */
  window: Map<number, [number, number]>;
}

/** One instance's breakers. Mirrors breaker.lua step for step. */
export class MemoryBreakerStore implements BreakerStore {
  readonly shared = false;
  private readonly circuits = new Map<string, MemoryCircuit>();

  private circuit(name: string): MemoryCircuit {
    let c = this.circuits.get(name);
    if (!c) {
      c = { st: 'c', until: 0, probe: '', probeUntil: 0, fails: 0, gen: 0, window: new Map() };
      this.circuits.set(name, c);
    }
    return c;
  }

  async acquire(name: string, config: BreakerConfig, now: number): Promise<Acquired> {
    const c = this.circuit(name);
    if (c.st === 'c') return { allowed: true, state: 'closed', probe: undefined, from: undefined };
    if (c.st === 'o' && now < c.until) return { allowed: false, state: 'open', retryAt: c.until };
    if (c.st === 'h' && now < c.probeUntil) return { allowed: false, state: 'half-open', retryAt: c.probeUntil };
    const from = fromCode(c.st) === 'open' ? 'open' : undefined;
    c.gen += 1;
    c.st = 'h';
    c.probe = `${c.gen}:${now}`;
    c.probeUntil = now + config.probeLeaseMs;
    return { allowed: true, state: 'half-open', probe: c.probe, from };
  }

  async record(
    name: string,
    config: BreakerConfig,
    ok: boolean,
    probe: string | undefined,
    now: number,
    successes = 0,
  ): Promise<Recorded> {
    const c = this.circuit(name);
    const none = { from: undefined, reason: undefined };
    if (c.st === 'h') {
      if (probe === undefined || probe !== c.probe) return { state: 'half-open', openUntil: undefined, ...none };
      c.probe = '';
      c.probeUntil = 0;
      if (ok) {
        Object.assign(c, { st: 'c', fails: 0, until: 0 });
        c.window.clear();
        return { state: 'closed', from: 'half-open', reason: 'probe succeeded', openUntil: undefined };
      }
      c.st = 'o';
      c.until = now + config.cooldownMs;
      return { state: 'open', from: 'half-open', reason: 'probe failed', openUntil: c.until };
    }
    if (c.st === 'o') return { state: 'open', openUntil: c.until, ...none };

    // The batched successes first: each resets the run of failures.
    if (successes > 0) c.fails = 0;
    c.fails = ok ? 0 : c.fails + 1;
    const bucketMs = Math.max(1, Math.ceil(config.windowMs / BUCKETS));
    const current = Math.floor(now / bucketMs);
    const bucket = c.window.get(current) ?? [0, 0];
    bucket[0] += 1 + successes;
    if (!ok) bucket[1] += 1;
    c.window.set(current, bucket);
    let calls = 0;
    let failed = 0;
    for (const [index, [n, f]] of c.window) {
      if (index <= current - BUCKETS) c.window.delete(index);
      else {
        calls += n;
        failed += f;
      }
    }
    const reason = ok ? undefined : tripReason(config, c.fails, calls, failed);
    if (reason === undefined) return { state: 'closed', openUntil: undefined, ...none };
    Object.assign(c, { st: 'o', until: now + config.cooldownMs, fails: 0 });
    c.window.clear();
    return { state: 'open', from: 'closed', reason, openUntil: c.until };
  }

  async release(name: string, _config: BreakerConfig, probe: string): Promise<void> {
    const c = this.circuit(name);
    if (c.st === 'h' && c.probe === probe) {
      c.probe = '';
      c.probeUntil = 0;
    }
  }
}

const breakerScript = new LuaScript('breaker');

/** Breakers shared by every instance on one Redis deployment prefix (key `{prefix}:breaker:{provider}`). */
export class RedisBreakerStore implements BreakerStore {
  readonly shared = true;
  private readonly keys;

  constructor(
    private readonly redis: Redis,
    prefix: string,
  ) {
    this.keys = redisKeys(prefix);
  }

  async acquire(name: string, config: BreakerConfig, now: number): Promise<Acquired> {
    const [state, allowed, token, retryAt, from] = await this.run('acquire', name, config, now, '0', '', 0);
    if (allowed === 1) {
      return { allowed: true, state: fromCode(state) ?? 'closed', probe: token === '' ? undefined : token, from: fromCode(from) };
    }
    return { allowed: false, state: state === 'h' ? 'half-open' : 'open', retryAt };
  }

  async record(
    name: string,
    config: BreakerConfig,
    ok: boolean,
    probe: string | undefined,
    now: number,
    successes = 0,
  ): Promise<Recorded> {
    const [state, , , until, from, reason] = await this.run('record', name, config, now, ok ? '1' : '0', probe ?? '', successes);
    return {
      state: fromCode(state) ?? 'closed',
      from: fromCode(from),
      reason: reason === '' ? undefined : reason,
      openUntil: state === 'o' ? until : undefined,
    };
  }

  async release(name: string, config: BreakerConfig, probe: string, now: number): Promise<void> {
    await this.run('release', name, config, now, '0', probe, 0);
  }

  private async run(
    op: string,
    name: string,
    c: BreakerConfig,
    now: number,
    ok: string,
    probe: string,
    successes: number,
  ): Promise<[string, number, string, number, string, string]> {
    const raw = (await breakerScript.run(
      this.redis,
      [this.keys.breaker(name)],
      [op, now, c.cooldownMs, c.probeLeaseMs, c.consecutiveFailures, c.errorRate, c.windowMs, c.minCalls, ok, probe, successes],
    )) as unknown[];
    const str = (i: number): string => (raw[i] === undefined || raw[i] === null ? '' : String(raw[i]));
    return [str(0), Number(raw[1] ?? 0), str(2), Number(raw[3] ?? 0), str(4), str(5)];
  }
}

/** A permit to send one attempt; pass it back with the result. */
export interface Permit {
  probe: string | undefined;
}

export type Admission = { ok: true; permit: Permit } | { ok: false; state: 'open' | 'half-open'; retryAt: number };

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

  constructor(
    readonly name: string,
    private readonly store: BreakerStore,
    readonly config: BreakerConfig,
    private readonly logger: Logger,
    private readonly clock: () => number = Date.now,
    private readonly syncMs = SYNC_MS,
  ) {}

  /** The state last seen. */
  get state(): CircuitState {
    return this.seen;
  }

  /** A guess without a round trip: false while this instance knows the circuit to be open. */
  mayAdmit(now: number): boolean {
    return this.seen === 'closed' || now >= this.blockedUntil;
  }

  async acquire(): Promise<Admission> {
    const now = this.clock();
    // Sending the successes brings the state back too: when it is closed, no acquire is needed.
    if (this.pending > 0 && !this.knownClosed(now)) await this.flush(now);
    if (this.knownClosed(now)) return { ok: true, permit: { probe: undefined } };
    let acquired: Acquired;
    try {
      acquired = await this.store.acquire(this.name, this.config, now);
    } catch (err) {
      this.storeFailed(err, 'acquire');
      return { ok: true, permit: { probe: undefined } };
    }
    this.syncedAt = now;
    if (!acquired.allowed) {
      this.blockedUntil = acquired.retryAt;
      this.observe(acquired.state, undefined, undefined);
      return { ok: false, state: acquired.state, retryAt: acquired.retryAt };
    }
    if (acquired.probe !== undefined) {
      this.observe('half-open', acquired.from, undefined);
      this.logger.debug({ provider: this.name }, 'this call is the half-open probe');
    } else {
      this.observe(acquired.state, acquired.from, undefined);
    }
    return { ok: true, permit: { probe: acquired.probe } };
  }

  async record(permit: Permit, ok: boolean, detail?: string): Promise<void> {
    if (this.store.shared && ok && permit.probe === undefined && this.seen === 'closed') {
      this.pending += 1;
      if (this.flushTimer === undefined && !this.closed) {
        this.flushTimer = setTimeout(() => {
          void this.flush(this.clock());
        }, this.syncMs);
        this.flushTimer.unref();
      }
      return;
    }
    await this.send(this.clock(), ok, permit.probe, this.takePending(), detail);
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
