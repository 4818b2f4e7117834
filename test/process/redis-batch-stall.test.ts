// A batched call Redis never answers (a stall longer than the command timeout): exactly its
// requests are answered `unavailable`, and Redis, running the call once the stall ends,
// admits none of them. A private redis-server, since the stall pauses all its clients' writes.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPrivateRedis, type PrivateRedis } from '../../bench/redis-server.js';
import { RedisStore } from '../../bridge/store/redis.js';
import { redisKeys } from '../../bridge/store/redis-keys.js';
import { connectRedis, uniquePrefix } from '../helpers/redis.js';
import { makeJob } from '../store/store-contract.js';

let server: PrivateRedis;
beforeAll(async () => {
  server = await startPrivateRedis();
});
afterAll(() => server.stop());

async function redisNow(redis: Redis): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** A queue member's job key (its last field, redis-keys.ts). */
const jobKeyOf = (member: string): string | undefined => member.split('|').at(-1);

describe('redis store: a batched call that fails', () => {
  it('answers exactly the requests of a call Redis never answered `unavailable`, and none of them is admitted after', async () => {
    const prefix = uniquePrefix('batch-stall');
    // The store's own connection, with the bridge's settings: a command not answered in 300 ms fails.
    const conn = new Redis(server.url, { commandTimeout: 300, maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true });
    await conn.connect();
    const admin = connectRedis(server.url);
    try {
      const offset = (await redisNow(admin)) - Date.now();
      const store = new RedisStore(conn, { prefix, health: { healthy: () => true, admitCutoff: () => Date.now() + offset + 150 } });
      const now = Date.now();
      const limits = { deviceRpm: 100, queueMax: 100 };
      const before = store.queue.admit(makeJob({ deviceId: 'cam', id: 'before', priority: 'normal', arrivalMs: now }), limits, now);
      expect(await before).toMatchObject({ kind: 'queued' });

      await admin.call('CLIENT', 'PAUSE', '800', 'WRITE');
      const stalled = ['s1', 's2', 's3'].map((id) => store.queue.admit(makeJob({ deviceId: 'cam', id, priority: 'normal', arrivalMs: now }), limits, now));
      const settled = await Promise.allSettled(stalled);
      expect(settled.map((s) => s.status === 'rejected' && (s.reason as { code?: string }).code)).toEqual(['unavailable', 'unavailable', 'unavailable']);

      // Redis runs the stalled call once the pause ends: every admission in it is past its cutoff.
      await admin.call('CLIENT', 'UNPAUSE');
      const after = await store.queue.admit(makeJob({ deviceId: 'cam', id: 'after', priority: 'normal', arrivalMs: Date.now() }), limits, Date.now());
      expect(after).toMatchObject({ kind: 'queued' });
      const k = redisKeys(prefix);
      expect(await admin.exists(...['s1', 's2', 's3'].map((id) => k.idem(`cam/${id}`)))).toBe(0);
      expect((await admin.zrange(k.queue, '0', '-1')).map(jobKeyOf)).toEqual(['cam/before', 'cam/after']);
    } finally {
      await admin.call('CLIENT', 'UNPAUSE');
      admin.disconnect();
      conn.disconnect();
    }
  });
});
