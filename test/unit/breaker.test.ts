// The circuit breaker's state machine, run against both stores with an explicit clock: the
// memory store (one instance) and the Redis store (breaker.lua, shared by every instance).
import { describe, expect, it } from 'vitest';
import type { BreakerStore } from '../../bridge/upstream/breaker-port.js';
import { MemoryBreakerStore } from '../../bridge/upstream/breaker-memory.js';
import { breakerRedis, CONFIG, fresh, T0 } from '../helpers/breaker.js';

interface StoreCase {
  name: string;
  make(): BreakerStore;
  /** A second handle on the same state (another instance), where the store can share. */
  other?(): BreakerStore;
}

const { redisStore } = breakerRedis();

const cases: StoreCase[] = [
  { name: 'memory', make: () => new MemoryBreakerStore() },
  { name: 'redis', make: redisStore, other: redisStore },
];

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
      const grants = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).acquire(name, CONFIG, T0 + 5000 + i)));
      expect(grants.filter((g) => g.allowed)).toHaveLength(1);
    });
  }
});
