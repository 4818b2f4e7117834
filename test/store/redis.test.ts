// The Redis store: the Store contract, and what only it does (one hash tag, many connections).
import { afterAll, describe, expect, it } from 'vitest';
import { RedisStore } from '../../bridge/store/redis.js';
import type { Store } from '../../bridge/store/types.js';
import { connectRedis, deletePrefix, uniquePrefix } from '../helpers/redis.js';
import { describeStoreContract, makeJob } from './store-contract.js';

const redis = connectRedis();
const prefixes = new Map<Store, string>();

afterAll(async () => {
  redis.disconnect();
});

describeStoreContract('redis', {
  durable: true,
  open: async () => {
    const prefix = uniquePrefix('store');
    const store = new RedisStore(redis, { prefix });
    prefixes.set(store, prefix);
    return store;
  },
  cleanup: async (store) => {
    await deletePrefix(redis, prefixes.get(store) ?? 'none');
    prefixes.delete(store);
  },
});

describe('redis store', () => {
  it('is durable', () => {
    expect(new RedisStore(redis, { prefix: uniquePrefix() }).durable).toBe(true);
  });

  it('puts every key under the deployment hash tag', async () => {
    const prefix = uniquePrefix('tag');
    const store = new RedisStore(redis, { prefix });
    const now = Date.now();
    const job = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'high', arrivalMs: now, lock: 'line-3', deadlineMs: now + 60_000 });
    await store.admit(job, { deviceRpm: 10, queueMax: 10 }, now);
    const [claimed] = (await store.claim({ owner: 'a', max: 1, leaseMs: 30_000, rpm: 10, tpm: 100 }, now)).jobs;
    if (!claimed) throw new Error('nothing claimed');
    await store.complete(claimed, { id: 'r-1', ok: false, error: { code: 'upstream_error', message: 'x' } }, { ttlS: 60, deadLetter: true }, now);
    const keys = await redis.keys(`*${prefix}*`);
    expect(keys.length).toBeGreaterThan(3);
    for (const key of keys) expect(key.startsWith(`{${prefix}}:`)).toBe(true);
    await deletePrefix(redis, prefix);
  });
});

describe('redis store across connections', () => {
  it('hands each of 2000 jobs to exactly one of 8 claimers on 8 connections', async () => {
    const prefix = uniquePrefix('conc');
    const connections = Array.from({ length: 8 }, () => connectRedis());
    try {
      const stores = connections.map((c) => new RedisStore(c, { prefix }));
      const now = Date.now();
      const limits = { deviceRpm: 5000, queueMax: 5000 };
      const admitter = stores[0] as RedisStore;
      await Promise.all(
        Array.from({ length: 2000 }, (_, i) =>
          admitter.admit(makeJob({ deviceId: `dev-${i % 40}`, id: `j-${i}`, priority: 'normal', arrivalMs: now + i }), limits, now),
        ),
      );
      const seen = new Map<string, number>();
      await Promise.all(
        stores.map(async (store, i) => {
          for (;;) {
            const { jobs } = await store.claim({ owner: `w${i}`, max: 5, leaseMs: 30_000, rpm: 100_000, tpm: undefined }, now);
            if (jobs.length === 0) return;
            for (const job of jobs) seen.set(job.key, (seen.get(job.key) ?? 0) + 1);
          }
        }),
      );
      expect(seen.size).toBe(2000);
      expect([...seen.values()].every((n) => n === 1)).toBe(true);
    } finally {
      await deletePrefix(redis, prefix);
      for (const c of connections) c.disconnect();
    }
  });
});
