// Upgrading from 0.6 and 0.7: what an older version left in Redis (a queued job, a running job
// with a recorded reply, pending idempotency records, the upstream's calls and pause; 0.7's
// per-lock fences) is moved into this version's layout at start-up, and every promise holds
// for it afterwards.
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_PRIORITY_OFFSETS_MS } from '../../bridge/config/config.js';
import { RedisStore } from '../../bridge/store/redis.js';
import { lockId, redisKeys } from '../../bridge/store/redis-keys.js';
import type { Job } from '../../bridge/model/job.js';
import { connectRedis, deletePrefix, uniquePrefix } from '../helpers/redis.js';
import { claimOpts, ids, leaves, LIMITS, makeJob, makeReply } from './contract/fixtures.js';

const redis = connectRedis();
afterAll(() => redis.disconnect());

const member = (seq: number, job: Job): string => `${String(seq).padStart(16, '0')}|${job.priority}|-|${job.tokenEstimate}|${job.key}`;
const data = (job: Job): string => {
  const { attempts: _attempts, ...rest } = job;
  return JSON.stringify(rest);
};

/** The keys 0.6.1 would have left for one queued job, one running job and three calls. */
async function writeOldLayout(prefix: string, now: number, queued: Job, running: Job): Promise<void> {
  const p = `{${prefix}}`;
  const k = redisKeys(prefix);
  const reply = makeReply(running, 'recorded before the crash');
  await redis
    .multi()
    .hset(`${p}:jobs`, queued.key, data(queued), running.key, data(running))
    .zadd(k.queue, queued.score, member(1, queued))
    .hset(`${p}:place`, queued.key, `q${member(1, queued)}`)
    .zadd(k.deadlines, now + 600_000, queued.key)
    .hset(k.depth, 'normal', 1)
    .set(k.idem(queued.key), 'p')
    .set(k.idem(running.key), 'p')
    .hset(`${p}:owners`, running.key, `old-instance||${running.score}||${member(2, running)}`)
    .zadd(k.leases, now - 1, running.key)
    .hset(`${p}:attempts`, running.key, 1)
    .hset(`${p}:recorded`, running.key, JSON.stringify(reply))
    .zadd(`${p}:calls`, now - 10_000, '3:10', now - 10_000, '4:10', now - 9_000, '5:10')
    .set(`${p}:calltokens`, 30)
    .set(`${p}:pause`, now + 5000)
    .exec();
}

describe('redis store: upgrade from 0.6', () => {
  it('moves a queue longer than one batch, every job of it', async () => {
    const prefix = uniquePrefix('upgrade-many');
    try {
      const now = Date.now();
      const p = `{${prefix}}`;
      const k = redisKeys(prefix);
      const jobs = Array.from({ length: 1234 }, (_, i) => makeJob({ deviceId: `d${i % 50}`, id: `r${i}`, priority: 'normal', arrivalMs: now - 5000 + i }));
      const write = redis.multi();
      jobs.forEach((job, i) => {
        write
          .hset(`${p}:jobs`, job.key, data(job))
          .zadd(k.queue, job.score, member(i + 1, job))
          .hset(`${p}:place`, job.key, `q${member(i + 1, job)}`)
          .set(k.idem(job.key), 'p');
      });
      await write.hset(k.depth, 'normal', jobs.length).exec();
      const store = new RedisStore(redis, { prefix });
      expect(await store.upgrade(now)).toBe(jobs.length);
      expect(await redis.exists(...k.legacy)).toBe(0);
      const claimed = await store.queue.claim(claimOpts({ max: 2000, rpm: 10_000 }), now);
      expect(claimed.jobs.map((j) => j.key).sort()).toEqual(jobs.map((j) => j.key).sort());
    } finally {
      await deletePrefix(redis, prefix);
    }
  });

  it('moves queued and running jobs, their records and the upstream budget, and serves them as before', async () => {
    const prefix = uniquePrefix('upgrade');
    try {
      const store = new RedisStore(redis, { prefix });
      const now = Date.now();
      const queued = makeJob({ deviceId: 'cam-1', id: 'waiting', priority: 'normal', arrivalMs: now - 20_000, deadlineMs: now + 600_000 });
      const running = makeJob({ deviceId: 'cam-2', id: 'running', priority: 'normal', arrivalMs: now - 19_000 });
      await writeOldLayout(prefix, now, queued, running);

      expect(await store.upgrade(now)).toBe(2);
      expect(await redis.exists(...redisKeys(prefix).legacy)).toBe(0);
      expect(await store.upgrade(now)).toBe(0); // nothing left: a second start moves nothing

      // Still pending: a repeat is a duplicate, not a new job.
      expect(await store.queue.admit(queued, LIMITS, now)).toEqual({ kind: 'duplicate_pending' });
      // The pause and the three calls came along: rpm 3 is spent until the oldest bucket leaves.
      expect(await store.queue.claim(claimOpts(), now + 1)).toEqual({ jobs: [], expired: [], retryAtMs: now + 5000 });
      expect(await store.limits.takeRate(10, 3, undefined, now + 6000)).toEqual({ ok: false, retryAtMs: leaves(now - 10_000) });

      // The running job's lease ran out: it goes back with its attempts and its recorded reply.
      expect(await store.queue.reap(5, now + 6000)).toEqual([]);
      const claimed = await store.queue.claim(claimOpts({ max: 10 }), leaves(now - 9_000));
      expect(ids(claimed.jobs)).toEqual(['waiting', 'running']);
      const [first, second] = claimed.jobs;
      expect(first?.attempts).toBe(0);
      expect(second?.attempts).toBe(2);
      expect(second?.recordedReply).toMatchObject({ content: 'recorded before the crash' });

      if (!first) throw new Error('nothing claimed');
      await store.queue.complete(first, makeReply(first), { ttlS: 60, deadLetter: false }, leaves(now - 9_000));
      expect(await store.queue.admit(queued, LIMITS, leaves(now - 9_000) + 1)).toMatchObject({ kind: 'duplicate_done' });
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
    } finally {
      await deletePrefix(redis, prefix);
    }
  });
});

describe('redis store: upgrade from 0.7', () => {
  it('folds the per-lock fences hash into the one counter, so no lock is granted a fence it had before', async () => {
    const prefix = uniquePrefix('upgrade-fences');
    try {
      const k = redisKeys(prefix);
      const now = Date.now();
      const write = redis.multi();
      // 0.7 kept one field per lock name ever granted; one of them far ahead of the others.
      for (let i = 0; i < 1234; i += 1) write.hset(k.oldFences, lockId(`lock-${i}`), i === 700 ? 90_000 : i + 1);
      await write.exec();
      const store = new RedisStore(redis, { prefix });
      await store.upgrade(now);
      expect(await redis.exists(k.oldFences)).toBe(0);
      expect(Number(await redis.get(k.fence))).toBe(90_000);
      await store.upgrade(now); // a second start changes nothing
      expect(Number(await redis.get(k.fence))).toBe(90_000);

      const job = makeJob({ deviceId: 'cam-1', id: 'l', priority: 'normal', arrivalMs: now, lock: 'lock-700' });
      await store.queue.admit(job, LIMITS, now);
      const [held] = (await store.queue.claim(claimOpts(), now)).jobs;
      expect(held?.fence).toBe(90_001);
    } finally {
      await deletePrefix(redis, prefix);
    }
  });

  it("moves 0.7's dead-letter list into the bounded one, within its bounds and age, and serves it as before", async () => {
    const prefix = uniquePrefix('upgrade-dlq');
    try {
      const k = redisKeys(prefix);
      const now = Date.now();
      const entry = (id: string, atMs: number): string => {
        const job = makeJob({ deviceId: 'cam-1', id, priority: 'low', arrivalMs: atMs - 100 });
        return JSON.stringify({ job, reply: { id, ok: false, error: { code: 'upstream_error', message: 'x' } }, atMs });
      };
      // 250 entries (more than one step) from oldest to newest; the first one past DLQ_TTL_S.
      const old = [entry('aged', now - 3_600_000), ...Array.from({ length: 250 }, (_, i) => entry(`r${i}`, now - 1000 + i))];
      await redis.rpush(k.oldDlq, ...old);
      const store = new RedisStore(redis, { prefix, deadLetters: { max: 200, maxBytes: 64 * 1024 * 1024, ttlS: 600 } });
      await store.upgrade(now);
      expect(await redis.exists(k.oldDlq)).toBe(0);
      expect((await store.operations.deadLetters.stats(now)).count).toBe(200);
      expect(store.operations.deadLetters.dropped()).toBe(50); // the oldest 50 over DLQ_MAX
      const first = await store.operations.deadLetters.page(2, undefined, now);
      expect(first.entries.map((d) => d.job.id)).toEqual(['r50', 'r51']);
      expect(await store.operations.deadLetters.get('cam-1/aged', now)).toBeUndefined();
      expect(await store.operations.deadLetters.replay(['cam-1/r249'], DEFAULT_PRIORITY_OFFSETS_MS, now)).toBe(1);
      expect(await store.operations.queueDepth()).toMatchObject({ low: 1 });
    } finally {
      await deletePrefix(redis, prefix);
    }
  });
});
