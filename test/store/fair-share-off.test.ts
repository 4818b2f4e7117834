// FAIR_SHARE=false, on both stores: within a class the earliest job goes first, whatever the
// device has used, and no fair-share key is written in Redis.
import { afterAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../bridge/store/memory.js';
import { RedisStore } from '../../bridge/store/redis.js';
import type { Job } from '../../bridge/model/job.js';
import type { Store } from '../../bridge/store/port.js';
import { connectRedis, deletePrefix, uniquePrefix } from '../helpers/redis.js';
import { admitAll, baseTime, claimOpts, ids, makeJob } from './contract/fixtures.js';

const redis = connectRedis();
const prefixes: string[] = [];
afterAll(async () => {
  for (const prefix of prefixes) await deletePrefix(redis, prefix);
  redis.disconnect();
});

const job = (deviceId: string, id: string, arrivalMs: number): Job => ({ ...makeJob({ deviceId, id, priority: 'normal', arrivalMs }), fairCost: 10 });

const STORES: Array<[string, () => Store]> = [
  ['memory', () => new MemoryStore({ fairShare: false })],
  [
    'redis',
    () => {
      const prefix = uniquePrefix('fifo');
      prefixes.push(prefix);
      return new RedisStore(redis, { prefix, fairShare: false });
    },
  ],
];

describe.each(STORES)('fair share off (%s)', (name, open) => {
  it('claims first come, first served within a class', async () => {
    const store = open();
    const t = baseTime();
    await admitAll(store, [job('a', 'a1', t), job('a', 'a2', t), job('a', 'a3', t)], t);
    await admitAll(store, [job('b', 'b1', t + 1), job('b', 'b2', t + 1)], t + 1);
    if (name === 'redis') {
      const prefix = prefixes.at(-1) as string;
      expect(await redis.keys(`{${prefix}}:*:normal*`)).toEqual([]); // no lane, marker or class index
    }
    const order: string[] = [];
    for (let i = 0; i < 5; i += 1) order.push(...ids((await store.queue.claim(claimOpts({ max: 1 }), t + 10 + i)).jobs));
    expect(order).toEqual(['a1', 'a2', 'a3', 'b1', 'b2']);
    await store.close();
  });
});
