// The circuit breaker's state machine, run against both stores with an explicit clock: the
// memory store (one instance) and the Redis store (breaker.lua, shared by every instance).
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../bridge/logger.js';
import { redisKeys } from '../../bridge/store/redis-keys.js';
import {
  Breaker,
  MemoryBreakerStore,
  RedisBreakerStore,
  type BreakerConfig,
  type BreakerStore,
} from '../../bridge/upstream/breaker.js';
import { logSink } from '../helpers/log-sink.js';
import { connectRedis, deletePrefix, uniquePrefix } from '../helpers/redis.js';

const CONFIG: BreakerConfig = {
  consecutiveFailures: 3,
  errorRate: 0.5,
  windowMs: 10_000,
  minCalls: 6,
  cooldownMs: 5000,
  probeLeaseMs: 2000,
};

const T0 = 1_700_000_000_000;

interface StoreCase {
  name: string;
  make(): BreakerStore;
  /** A second handle on the same state (another instance), where the store can share. */
  other?(): BreakerStore;
}

const redisConnections: Redis[] = [];
let prefix = '';

beforeAll(() => {
  prefix = uniquePrefix('breaker');
});

afterAll(async () => {
  const [first] = redisConnections;
  if (first) await deletePrefix(first, prefix);
  for (const r of redisConnections) r.disconnect();
});

function connection(): Redis {
  const redis = connectRedis();
  redisConnections.push(redis);
  return redis;
}

const redisStore = (): RedisBreakerStore => new RedisBreakerStore(connection(), prefix);

const cases: StoreCase[] = [
  { name: 'memory', make: () => new MemoryBreakerStore() },
  { name: 'redis', make: redisStore, other: redisStore },
];

let circuitSeq = 0;
const fresh = (): string => `p${(circuitSeq += 1)}`;

async function fail(store: BreakerStore, name: string, times: number, now: number, config = CONFIG): Promise<void> {
  for (let i = 0; i < times; i += 1) await store.record(name, config, false, undefined, now);
}

describe.each(cases)('breaker state machine ($name store)', (c) => {
  it('admits calls while closed and opens after N consecutive failures', async () => {
    const store = c.make();
    const name = fresh();
    expect(await store.acquire(name, CONFIG, T0)).toEqual({ allowed: true, state: 'closed', probe: undefined, from: undefined });
    await fail(store, name, 2, T0);
    expect((await store.acquire(name, CONFIG, T0)).allowed).toBe(true);
    const third = await store.record(name, CONFIG, false, undefined, T0 + 10);
    expect(third).toEqual({ state: 'open', from: 'closed', reason: '3 consecutive failures', openUntil: T0 + 10 + 5000 });
    expect(await store.acquire(name, CONFIG, T0 + 20)).toEqual({ allowed: false, state: 'open', retryAt: T0 + 5010 });
  });

  it('a success resets the consecutive count', async () => {
    const store = c.make();
    const name = fresh();
    await fail(store, name, 2, T0);
    await store.record(name, CONFIG, true, undefined, T0);
    await fail(store, name, 2, T0);
    expect((await store.acquire(name, CONFIG, T0)).allowed).toBe(true);
  });

  it('opens on the error rate over the window once minCalls were made', async () => {
    const store = c.make();
    const name = fresh();
    // ok, fail, ok, fail, ok: 2 of 5 failed, under minCalls (6) anyway, never 3 in a row.
    for (const ok of [true, false, true, false, true]) {
      expect((await store.record(name, CONFIG, ok, undefined, T0)).state).toBe('closed');
    }
    // The sixth call fails: 3 of 6 = 50%.
    const sixth = await store.record(name, CONFIG, false, undefined, T0 + 1);
    expect(sixth.state).toBe('open');
    expect(sixth.reason).toBe('50% of 6 calls failed within 10000 ms');
  });

  it('forgets calls that left the window', async () => {
    const store = c.make();
    const name = fresh();
    // Old failures, each followed by a success so they never run 3 in a row.
    for (const ok of [false, true, false, true, false, true]) await store.record(name, CONFIG, ok, undefined, T0);
    // 11 s later they are out of the 10 s window: one failure among two calls is no trip (minCalls 6).
    await store.record(name, CONFIG, true, undefined, T0 + 11_000);
    expect((await store.record(name, CONFIG, false, undefined, T0 + 11_000)).state).toBe('closed');
  });

  it('half-opens after the cool-down with exactly one probe; the others skip the provider', async () => {
    const store = c.make();
    const name = fresh();
    await fail(store, name, 3, T0);
    expect((await store.acquire(name, CONFIG, T0 + 4999)).allowed).toBe(false);
    const probe = await store.acquire(name, CONFIG, T0 + 5000);
    expect(probe).toMatchObject({ allowed: true, state: 'half-open', from: 'open' });
    expect(probe.allowed && probe.probe).toBeTruthy();
    expect(await store.acquire(name, CONFIG, T0 + 5001)).toEqual({ allowed: false, state: 'half-open', retryAt: T0 + 7000 });
  });

  it('closes when the probe succeeds, with a fresh count', async () => {
    const store = c.make();
    const name = fresh();
    await fail(store, name, 3, T0);
    const probe = await store.acquire(name, CONFIG, T0 + 6000);
    if (!probe.allowed) throw new Error('expected the probe');
    expect(await store.record(name, CONFIG, true, probe.probe, T0 + 6100)).toEqual({
      state: 'closed',
      from: 'half-open',
      reason: 'probe succeeded',
      openUntil: undefined,
    });
    expect(await store.acquire(name, CONFIG, T0 + 6200)).toMatchObject({ allowed: true, state: 'closed', probe: undefined });
    await fail(store, name, 2, T0 + 6300); // counting starts over: two failures do not trip
    expect((await store.acquire(name, CONFIG, T0 + 6300)).allowed).toBe(true);
  });

  it('opens again for another cool-down when the probe fails', async () => {
    const store = c.make();
    const name = fresh();
    await fail(store, name, 3, T0);
    const probe = await store.acquire(name, CONFIG, T0 + 5000);
    if (!probe.allowed) throw new Error('expected the probe');
    expect(await store.record(name, CONFIG, false, probe.probe, T0 + 5500)).toEqual({
      state: 'open',
      from: 'half-open',
      reason: 'probe failed',
      openUntil: T0 + 10_500,
    });
    expect(await store.acquire(name, CONFIG, T0 + 10_499)).toEqual({ allowed: false, state: 'open', retryAt: T0 + 10_500 });
    expect((await store.acquire(name, CONFIG, T0 + 10_500)).allowed).toBe(true);
  });

  it('ignores results of calls that hold no probe while open or half-open', async () => {
    const store = c.make();
    const name = fresh();
    await fail(store, name, 3, T0);
    // A call that started before the circuit opened reports late: no effect.
    expect((await store.record(name, CONFIG, true, undefined, T0 + 100)).state).toBe('open');
    const probe = await store.acquire(name, CONFIG, T0 + 5000);
    if (!probe.allowed) throw new Error('expected the probe');
    expect((await store.record(name, CONFIG, true, undefined, T0 + 5001)).state).toBe('half-open');
    expect((await store.record(name, CONFIG, false, 'not-the-probe', T0 + 5002)).state).toBe('half-open');
    expect((await store.acquire(name, CONFIG, T0 + 5003)).allowed).toBe(false);
  });

  it('grants the probe again when its lease lapses, and ignores the stale holder', async () => {
    const store = c.make();
    const name = fresh();
    await fail(store, name, 3, T0);
    const first = await store.acquire(name, CONFIG, T0 + 5000);
    const second = await store.acquire(name, CONFIG, T0 + 7000); // lease 2000 ms
    if (!first.allowed || !second.allowed) throw new Error('expected two probes');
    expect(second.probe).not.toBe(first.probe);
    expect((await store.record(name, CONFIG, true, first.probe, T0 + 7100)).state).toBe('half-open');
    expect((await store.record(name, CONFIG, true, second.probe, T0 + 7200)).state).toBe('closed');
  });

  it('applies batched successes first: they reset the run of failures', async () => {
    const store = c.make();
    const name = fresh();
    await fail(store, name, 2, T0);
    // Without the success before it, this would be the third failure in a row.
    expect((await store.record(name, CONFIG, false, undefined, T0, 1)).state).toBe('closed');
    await fail(store, name, 1, T0);
    expect(await store.record(name, CONFIG, false, undefined, T0)).toMatchObject({ state: 'open', reason: '3 consecutive failures' });
  });

  it('counts batched successes in the error-rate window', async () => {
    const store = c.make();
    const name = fresh();
    // ok ok fail | fail | ok fail: 3 of 6 failed, never 3 in a row.
    expect((await store.record(name, CONFIG, false, undefined, T0, 2)).state).toBe('closed');
    expect((await store.record(name, CONFIG, false, undefined, T0)).state).toBe('closed');
    expect(await store.record(name, CONFIG, false, undefined, T0, 1)).toMatchObject({
      state: 'open',
      reason: '50% of 6 calls failed within 10000 ms',
    });
  });

  it('ignores batched successes while open, like any result without the probe', async () => {
    const store = c.make();
    const name = fresh();
    await fail(store, name, 3, T0);
    expect((await store.record(name, CONFIG, true, undefined, T0 + 100, 5)).state).toBe('open');
    const probe = await store.acquire(name, CONFIG, T0 + 5000);
    if (!probe.allowed) throw new Error('expected the probe');
    expect((await store.record(name, CONFIG, false, probe.probe, T0 + 5100, 5)).state).toBe('open');
  });

  it('lets another caller probe at once when the probe is released unused', async () => {
    const store = c.make();
    const name = fresh();
    await fail(store, name, 3, T0);
    const first = await store.acquire(name, CONFIG, T0 + 5000);
    if (!first.allowed || first.probe === undefined) throw new Error('expected the probe');
    await store.release(name, CONFIG, first.probe, T0 + 5001);
    const next = await store.acquire(name, CONFIG, T0 + 5002);
    expect(next).toMatchObject({ allowed: true, state: 'half-open' });
  });

  if (c.other) {
    const other = c.other;
    it('is shared: another instance sees the open circuit, and of many concurrent callers exactly one probes', async () => {
      const a = c.make();
      const b = other();
      const name = fresh();
      await fail(a, name, 3, T0);
      expect(await b.acquire(name, CONFIG, T0 + 100)).toEqual({ allowed: false, state: 'open', retryAt: T0 + 5000 });
      const grants = await Promise.all(
        Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).acquire(name, CONFIG, T0 + 5000 + i)),
      );
      expect(grants.filter((g) => g.allowed)).toHaveLength(1);
    });
  }
});


describe('Breaker', () => {
  it('logs every state change with the provider and the reason', async () => {
    let now = T0;
    const sink = logSink();
    const breaker = new Breaker('primary', new MemoryBreakerStore(), CONFIG, createLogger('info', sink.stream), () => now);
    for (let i = 0; i < 3; i += 1) {
      const admission = await breaker.acquire();
      if (!admission.ok) throw new Error('expected admission');
      await breaker.record(admission.permit, false, 'network error: ECONNREFUSED');
    }
    expect(breaker.state).toBe('open');
    expect(breaker.mayAdmit(now)).toBe(false);
    expect(await breaker.acquire()).toEqual({ ok: false, state: 'open', retryAt: T0 + 5000 });
    now += 5000;
    expect(breaker.mayAdmit(now)).toBe(true);
    const probe = await breaker.acquire();
    if (!probe.ok) throw new Error('expected the probe');
    expect(probe.permit.probe).toBeDefined();
    expect(breaker.state).toBe('half-open');
    await breaker.record(probe.permit, true);
    expect(breaker.state).toBe('closed');

    const messages = sink.lines().map((l) => [l.msg, l.provider, l.from, l.reason]);
    expect(messages).toEqual([
      ['circuit open: primary gets no calls for the cool-down', 'primary', 'closed', '3 consecutive failures; last: network error: ECONNREFUSED'],
      ['circuit half-open: primary gets one probe call', 'primary', 'open', undefined],
      ['circuit closed: primary is back', 'primary', 'half-open', 'probe succeeded'],
    ]);
  });

  it('lets calls through (and says so) when its store fails', async () => {
    const sink = logSink();
    const broken: BreakerStore = {
      shared: false,
      acquire: () => Promise.reject(new Error('Redis is away')),
      record: () => Promise.reject(new Error('Redis is away')),
      release: () => Promise.reject(new Error('Redis is away')),
    };
    const breaker = new Breaker('primary', broken, CONFIG, createLogger('info', sink.stream));
    const admission = await breaker.acquire();
    expect(admission.ok).toBe(true);
    if (admission.ok) await breaker.record(admission.permit, false);
    expect(sink.lines()[0]).toMatchObject({ msg: 'circuit breaker state unavailable; letting calls through', err: 'Redis is away' });
  });
});

/** Wraps a store and lists the calls made to it. */
function counting(inner: BreakerStore): BreakerStore & { calls: string[] } {
  const calls: string[] = [];
  return {
    shared: inner.shared,
    calls,
    acquire: (...args: Parameters<BreakerStore['acquire']>) => {
      calls.push('acquire');
      return inner.acquire(...args);
    },
    record: (...args: Parameters<BreakerStore['record']>) => {
      calls.push('record');
      return inner.record(...args);
    },
    release: (...args: Parameters<BreakerStore['release']>) => {
      calls.push('release');
      return inner.release(...args);
    },
  };
}

/** Calls counted in the circuit's error-rate window in Redis. */
async function windowCalls(redis: Redis, name: string): Promise<number> {
  const fields = await redis.hgetall(redisKeys(prefix).breaker(name));
  return Object.entries(fields)
    .filter(([field]) => field.startsWith('wc:'))
    .reduce((sum, [, n]) => sum + Number(n), 0);
}

describe('Breaker with a shared store (Redis)', () => {
  const silent = createLogger('silent');
  /**
   * Shorter than the cool-down, longer than any of these tests runs: the flush timer fires only
   * where a test waits for it.
   */
  const SYNC = 1000;

  async function run(breaker: Breaker, ok: boolean): Promise<void> {
    const admission = await breaker.acquire();
    if (!admission.ok) throw new Error('expected admission');
    await breaker.record(admission.permit, ok, ok ? undefined : 'boom');
  }

  it('answers acquire locally while closed, and sends the successes in one call once the state is stale', async () => {
    let now = T0;
    const redis = connection();
    const store = counting(new RedisBreakerStore(redis, prefix));
    const name = fresh();
    const breaker = new Breaker(name, store, CONFIG, silent, () => now, SYNC);
    for (let i = 0; i < 50; i += 1) await run(breaker, true);
    expect(store.calls).toEqual(['acquire']);
    expect(await windowCalls(redis, name)).toBe(0);

    now += SYNC;
    expect((await breaker.acquire()).ok).toBe(true);
    expect(store.calls).toEqual(['acquire', 'record']);
    expect(await windowCalls(redis, name)).toBe(50);
    breaker.close();
  });

  it('sends the successes within the sync interval without another call', async () => {
    const redis = connection();
    const store = counting(new RedisBreakerStore(redis, prefix));
    const name = fresh();
    const breaker = new Breaker(name, store, CONFIG, silent, () => T0, 20);
    for (let i = 0; i < 10; i += 1) await run(breaker, true);
    await vi.waitFor(async () => expect(await windowCalls(redis, name)).toBe(10));
    expect(store.calls).toEqual(['acquire', 'record']);
    breaker.close();
  });

  it('records a failure after the successes pending before it', async () => {
    const sink = logSink();
    const redis = connection();
    const name = fresh();
    const breaker = new Breaker(name, new RedisBreakerStore(redis, prefix), CONFIG, createLogger('info', sink.stream), () => T0, SYNC);
    await run(breaker, true);
    await run(breaker, true);
    await run(breaker, false); // the two successes first, so the run of failures starts here
    expect(await redis.hget(redisKeys(prefix).breaker(name), 'fails')).toBe('1');
    await run(breaker, false);
    await run(breaker, true);
    // ok ok fail fail ok fail: 3 of 6 failed (the successes count), never 3 in a row.
    await run(breaker, false);
    expect(breaker.state).toBe('open');
    expect(sink.lines()).toEqual([
      expect.objectContaining({ msg: `circuit open: ${name} gets no calls for the cool-down`, reason: '50% of 6 calls failed within 10000 ms; last: boom' }),
    ]);
    breaker.close();
  });

  it('sees within the sync interval that another instance opened the circuit', async () => {
    let now = T0;
    const sink = logSink();
    const name = fresh();
    const a = new Breaker(name, redisStore(), CONFIG, createLogger('info', sink.stream), () => now, SYNC);
    const b = new Breaker(name, redisStore(), CONFIG, silent, () => now, SYNC);
    await run(a, true);
    for (let i = 0; i < 3; i += 1) await run(b, false);
    expect(b.state).toBe('open');

    // Until its knowledge is SYNC old, `a` trusts the closed state it saw.
    now += SYNC - 1;
    expect((await a.acquire()).ok).toBe(true);
    now += 1;
    expect(await a.acquire()).toEqual({ ok: false, state: 'open', retryAt: T0 + CONFIG.cooldownMs });
    expect(a.state).toBe('open');
    expect(sink.lines()).toEqual([expect.objectContaining({ by: 'another instance', from: 'closed' })]);
    a.close();
    b.close();
  });

  it('sends nothing after close', async () => {
    const store = counting(redisStore());
    const breaker = new Breaker(fresh(), store, CONFIG, silent, () => T0, 20);
    await run(breaker, true);
    breaker.close();
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(store.calls).toEqual(['acquire']);
  });

  it('lets calls through, warning once, when the store fails', async () => {
    const sink = logSink();
    const away = (): Promise<never> => Promise.reject(new Error('Redis is away'));
    const broken = counting({ shared: true, acquire: away, record: away, release: away });
    const breaker = new Breaker('primary', broken, CONFIG, createLogger('info', sink.stream), () => T0, SYNC);
    for (const ok of [true, true, false, true]) await run(breaker, ok);
    // Never known closed, so every acquire asks, after sending the successes pending.
    expect(broken.calls).toEqual(['acquire', 'record', 'acquire', 'record', 'acquire', 'record', 'acquire']);
    expect(sink.lines()).toHaveLength(1);
    expect(sink.lines()[0]).toMatchObject({ msg: 'circuit breaker state unavailable; letting calls through', err: 'Redis is away' });
    breaker.close();
  });
});
