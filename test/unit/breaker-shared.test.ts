// The Breaker in front of its store, with an explicit clock: the state changes it logs, and with a
// shared store (Redis) how it keeps the common case local and still sees other instances' changes.
import type { Redis } from 'ioredis';
import { describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../bridge/logger.js';
import { RedisBreakerStore } from '../../bridge/store/breaker-state.js';
import type { BreakerStore } from '../../bridge/upstream/breaker-port.js';
import { redisKeys } from '../../bridge/store/redis-keys.js';
import { Breaker } from '../../bridge/upstream/breaker.js';
import { MemoryBreakerStore } from '../../bridge/upstream/breaker-memory.js';
import { breakerRedis, CONFIG, fresh, T0 } from '../helpers/breaker.js';
import { logSink } from '../helpers/log-sink.js';

const { connection, redisStore, prefix } = breakerRedis();

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
  const fields = await redis.hgetall(redisKeys(prefix()).breaker(name));
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
    const store = counting(new RedisBreakerStore(redis, prefix()));
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
    const store = counting(new RedisBreakerStore(redis, prefix()));
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
    const breaker = new Breaker(name, new RedisBreakerStore(redis, prefix()), CONFIG, createLogger('info', sink.stream), () => T0, SYNC);
    await run(breaker, true);
    await run(breaker, true);
    await run(breaker, false); // the two successes first, so the run of failures starts here
    expect(await redis.hget(redisKeys(prefix()).breaker(name), 'fails')).toBe('1');
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
