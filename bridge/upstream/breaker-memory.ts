// Circuit-breaker state for one instance, in memory: the same algorithm as store/lua/breaker.lua,
// step for step, behind the same BreakerStore interface.
import type { Acquired, BreakerConfig, Recorded } from '../model/circuit.js';
import type { BreakerStore } from './breaker-port.js';

/** Buckets per window: the error rate is counted over the last BUCKETS buckets of windowMs/BUCKETS. */
const BUCKETS = 10;

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

const NO_CHANGE = { from: undefined, reason: undefined };
/** The common answers, shared rather than built per call (the Breaker only reads them). */
const CLOSED_ACQUIRED: Acquired = Object.freeze({ allowed: true, state: 'closed', probe: undefined, from: undefined });
const STAYS_CLOSED: Recorded = Object.freeze({ state: 'closed', openUntil: undefined, ...NO_CHANGE });

/** One instance's breakers. Mirrors breaker.lua step for step. */
export class MemoryBreakerStore implements BreakerStore {
  readonly shared = false;
  private readonly circuits = new Map<string, MemoryCircuit>();

  async acquire(name: string, config: BreakerConfig, now: number): Promise<Acquired> {
    return this.acquireNow(name, config, now);
  }

  async record(name: string, config: BreakerConfig, ok: boolean, probe: string | undefined, now: number, successes = 0): Promise<Recorded> {
    return this.recordNow(name, config, ok, probe, now, successes);
  }

  /** acquire, answered at once: in memory no step needs a round trip (Breaker uses these directly). */
  acquireNow(name: string, config: BreakerConfig, now: number): Acquired {
    const c = this.circuit(name);
    if (c.st === 'c') return CLOSED_ACQUIRED;
    if (c.st === 'o' && now < c.until) return { allowed: false, state: 'open', retryAt: c.until };
    if (c.st === 'h' && now < c.probeUntil) return { allowed: false, state: 'half-open', retryAt: c.probeUntil };
    const from = c.st === 'o' ? 'open' : undefined;
    c.gen += 1;
    c.st = 'h';
    c.probe = `${c.gen}:${now}`;
    c.probeUntil = now + config.probeLeaseMs;
    return { allowed: true, state: 'half-open', probe: c.probe, from };
  }

  recordNow(name: string, config: BreakerConfig, ok: boolean, probe: string | undefined, now: number, successes = 0): Recorded {
    const c = this.circuit(name);
    if (c.st === 'h') return this.probeResult(c, config, ok, probe, now);
    if (c.st === 'o') return { state: 'open', openUntil: c.until, ...NO_CHANGE };
    return this.closedResult(c, config, ok, now, successes);
  }

  async release(name: string, _config: BreakerConfig, probe: string): Promise<void> {
    const c = this.circuit(name);
    if (c.st === 'h' && c.probe === probe) {
      c.probe = '';
      c.probeUntil = 0;
    }
  }

  private circuit(name: string): MemoryCircuit {
    let c = this.circuits.get(name);
    if (!c) {
      c = { st: 'c', until: 0, probe: '', probeUntil: 0, fails: 0, gen: 0, window: new Map() };
      this.circuits.set(name, c);
    }
    return c;
  }

  /** Half-open: only the probe's own result counts; it closes or reopens the circuit. */
  private probeResult(c: MemoryCircuit, config: BreakerConfig, ok: boolean, probe: string | undefined, now: number): Recorded {
    if (probe === undefined || probe !== c.probe) return { state: 'half-open', openUntil: undefined, ...NO_CHANGE };
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

  /** Closed: counts the outcome (after the batched successes) and opens on a trip. */
  private closedResult(c: MemoryCircuit, config: BreakerConfig, ok: boolean, now: number, successes: number): Recorded {
    // The batched successes first: each resets the run of failures.
    if (successes > 0) c.fails = 0;
    c.fails = ok ? 0 : c.fails + 1;
    const window = countWindow(c.window, config.windowMs, now, 1 + successes, ok ? 0 : 1);
    const reason = ok ? undefined : tripReason(config, c.fails, window.calls, window.failed);
    if (reason === undefined) return STAYS_CLOSED;
    Object.assign(c, { st: 'o', until: now + config.cooldownMs, fails: 0 });
    c.window.clear();
    return { state: 'open', from: 'closed', reason, openUntil: c.until };
  }
}

/** Adds `calls` and `failed` to the current bucket, drops the buckets that left the window, and sums the rest. */
function countWindow(window: Map<number, [number, number]>, windowMs: number, now: number, calls: number, failed: number): { calls: number; failed: number } {
  const bucketMs = Math.max(1, Math.ceil(windowMs / BUCKETS));
  const current = Math.floor(now / bucketMs);
  const bucket = window.get(current) ?? [0, 0];
  bucket[0] += calls;
  bucket[1] += failed;
  window.set(current, bucket);
  const total = WINDOW_TOTAL;
  total.calls = 0;
  total.failed = 0;
  for (const [index, counts] of window) {
    if (index <= current - BUCKETS) window.delete(index);
    else {
      total.calls += counts[0];
      total.failed += counts[1];
    }
  }
  return total;
}

/** countWindow's answer, reused: read at once by its caller, never kept. */
const WINDOW_TOTAL = { calls: 0, failed: 0 };
