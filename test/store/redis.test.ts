// The Redis store: the Store contract, and what only it does (one hash tag, many connections).
import { afterAll, describe, expect, it } from 'vitest';
import { RedisStore } from '../../bridge/store/redis.js';
import { redisKeys } from '../../bridge/store/redis-keys.js';
import { connectRedis, deletePrefix, redisStoreUnderTest, uniquePrefix } from '../helpers/redis.js';
import { describeStoreContract, makeJob, makeReply } from './store-contract.js';

const redis = connectRedis();

afterAll(async () => {
  redis.disconnect();
});

describeStoreContract(
  'redis',
  redisStoreUnderTest(() => redis),
);

describe('redis store', () => {
  it('refuses an admission that reaches Redis after its cutoff, writing nothing, and every step while Redis is silent', async () => {
    const prefix = uniquePrefix('late');
    try {
      const [seconds, micros] = await redis.time();
      const redisNow = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
      let healthy = true;
      let cutoff = redisNow - 1; // already past: the bridge gave up on it
      const store = new RedisStore(redis, { prefix, health: { healthy: () => healthy, admitCutoff: () => cutoff } });
      const now = Date.now();
      const limits = { deviceRpm: 10, queueMax: 10 };
      const job = makeJob({ deviceId: 'cam-1', id: 'late-1', priority: 'normal', arrivalMs: now });
      await expect(store.queue.admit(job, limits, now)).rejects.toMatchObject({ code: 'unavailable' });
      await expect(store.answers.admitAnswered(job, makeReply(job), 60, now)).rejects.toMatchObject({ code: 'unavailable' });
      expect(await redis.exists(redisKeys(prefix).idem(job.key), redisKeys(prefix).queue, redisKeys(prefix).quota('cam-1'))).toBe(0);
      cutoff = redisNow + 60_000;
      expect((await store.queue.admit(job, limits, now)).kind).toBe('queued');
      healthy = false;
      const other = makeJob({ deviceId: 'cam-1', id: 'late-2', priority: 'normal', arrivalMs: now });
      await expect(store.queue.admit(other, limits, now)).rejects.toMatchObject({ code: 'unavailable' });
      await expect(store.queue.claim({ owner: 'a', max: 1, leaseMs: 30_000, rpm: 10, tpm: 100 }, now)).rejects.toMatchObject({ code: 'unavailable' });
      expect(await redis.exists(redisKeys(prefix).idem(other.key))).toBe(0);
    } finally {
      await deletePrefix(redis, prefix);
    }
  });

  it('is durable', () => {
    expect(new RedisStore(redis, { prefix: uniquePrefix() }).durable).toBe(true);
  });

  it('puts every key under the deployment hash tag', async () => {
    const prefix = uniquePrefix('tag');
    const store = new RedisStore(redis, { prefix });
    const now = Date.now();
    const job = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'high', arrivalMs: now, lock: 'line-3', deadlineMs: now + 60_000 });
    await store.queue.admit(job, { deviceRpm: 10, queueMax: 10 }, now);
    const [claimed] = (await store.queue.claim({ owner: 'a', max: 1, leaseMs: 30_000, rpm: 10, tpm: 100 }, now)).jobs;
    if (!claimed) throw new Error('nothing claimed');
    await store.queue.complete(claimed, { id: 'r-1', ok: false, error: { code: 'upstream_error', message: 'x' } }, { ttlS: 60, deadLetter: true }, now);
    const keys = await redis.keys(`*${prefix}*`);
    expect(keys.length).toBeGreaterThan(3);
    for (const key of keys) expect(key.startsWith(`{${prefix}}:`)).toBe(true);
    await deletePrefix(redis, prefix);
  });

  it('keeps the job and its idempotency record in one key, and honours records older versions wrote', async () => {
    const prefix = uniquePrefix('idem');
    try {
      const store = new RedisStore(redis, { prefix });
      const keys = redisKeys(prefix);
      const now = Date.now();
      const limits = { deviceRpm: 10, queueMax: 10 };
      const fresh = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'normal', arrivalMs: now });
      expect((await store.queue.admit(fresh, limits, now)).kind).toBe('queued');
      expect(JSON.parse((await redis.hget(keys.idem(fresh.key), 'j')) ?? '{}')).toMatchObject({ key: fresh.key });
      await store.queue.complete(fresh, makeReply(fresh), { ttlS: 60, deadLetter: false }, now);
      expect(await redis.get(keys.idem(fresh.key))).toMatch(/^d\d+\|\{/);
      await redis.set(keys.idem('cam-1/old-0'), 'p'); // 0.6.1's pending record
      expect((await store.queue.admit(makeJob({ deviceId: 'cam-1', id: 'old-0', priority: 'normal', arrivalMs: now }), limits, now)).kind).toBe(
        'duplicate_pending',
      );
      const reply = { id: 'old-1', ok: false as const, error: { code: 'expired' as const, message: 'old' } };
      await redis.hset(keys.idem('cam-1/old-1'), 'state', 'done', 'exp', String(now + 60_000), 'reply', JSON.stringify(reply));
      await redis.hset(keys.idem('cam-1/old-2'), 'state', 'pending');
      expect(await store.queue.admit(makeJob({ deviceId: 'cam-1', id: 'old-1', priority: 'normal', arrivalMs: now }), limits, now)).toEqual({
        kind: 'duplicate_done',
        reply,
      });
      expect(await store.answers.storedReply('cam-1/old-1', now)).toEqual(reply);
      expect((await store.queue.admit(makeJob({ deviceId: 'cam-1', id: 'old-2', priority: 'normal', arrivalMs: now }), limits, now)).kind).toBe(
        'duplicate_pending',
      );
    } finally {
      await deletePrefix(redis, prefix);
    }
  });

  it('counts usage in four fields per (device, model, priority), written once a second, and reads the older one-dimension form', async () => {
    const prefix = uniquePrefix('usage');
    try {
      const store = new RedisStore(redis, { prefix });
      const now = Date.now();
      const hour = Math.floor(now / 3_600_000) * 3_600_000;
      const record = { deviceId: 'cam-1', model: 'gpt\tx', priority: 'high' as const, promptTokens: 10, completionTokens: 5, costUsd: 0.25 };
      await store.answers.recordUsage(record, now);
      await store.answers.recordUsage({ ...record, costUsd: 0 }, now);
      const key = redisKeys(prefix).usage(String(hour));
      expect(await redis.exists(key)).toBe(0); // counted in the instance until the next flush
      for (let i = 0; i < 300 && (await redis.exists(key)) === 0; i++) await new Promise((r) => setTimeout(r, 10));
      expect(Object.keys(await redis.hgetall(key)).sort()).toEqual(['c', 'p', 'r', 'usd'].map((m) => `cam-1\tgpt\tx\thigh\t${m}`));
      const keepMs = 8 * 24 * 3_600_000;
      expect(await redis.pttl(key)).toBeGreaterThan(keepMs - 60_000);
      expect(await redis.pttl(key)).toBeLessThanOrEqual(keepMs);
      await redis.hset(redisKeys(prefix).usage(String(hour - 3_600_000)), 'd\tcam-1\tr', '3', 'm\told-model\tr', '3', 'p\thigh\tr', '3');
      const report = await store.operations.usage(hour - 3_600_000, now);
      expect(report.byDevice['cam-1']).toEqual({ requests: 5, promptTokens: 20, completionTokens: 10, costUsd: 0.25 });
      expect(report.byModel['gpt\tx']).toEqual({ requests: 2, promptTokens: 20, completionTokens: 10, costUsd: 0.25 });
      expect(report.byModel['old-model']?.requests).toBe(3);
      expect(report.byPriority.high?.requests).toBe(5);
      expect(report.total.requests).toBe(5);
    } finally {
      await deletePrefix(redis, prefix);
    }
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
          admitter.queue.admit(makeJob({ deviceId: `dev-${i % 40}`, id: `j-${i}`, priority: 'normal', arrivalMs: now + i }), limits, now),
        ),
      );
      const seen = new Map<string, number>();
      await Promise.all(
        stores.map(async (store, i) => {
          for (;;) {
            const { jobs } = await store.queue.claim({ owner: `w${i}`, max: 5, leaseMs: 30_000, rpm: 100_000, tpm: undefined }, now);
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
