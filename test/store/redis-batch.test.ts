// The Redis store sends the steps of one event-loop turn as one call: each request still gets
// its own answer, and a step that fails fails alone (test/process/redis-batch-stall.test.ts: a
// call that fails fails exactly its steps).
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { library } from '../../bridge/store/lua-library.js';
import { RedisStore } from '../../bridge/store/redis.js';
import { redisKeys } from '../../bridge/store/redis-keys.js';
import { connectRedis, deletePrefix, uniquePrefix } from '../helpers/redis.js';
import { makeJob } from './store-contract.js';

const redis = connectRedis();
const prefixes: string[] = [];

afterEach(async () => {
  vi.restoreAllMocks();
  for (const prefix of prefixes.splice(0)) await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

describe('redis store: steps batched per event-loop turn', () => {
  it('admits a turn of requests in one call, each with its own answer: invalid, duplicate, over quota, queued', async () => {
    const prefix = uniquePrefix('batch');
    prefixes.push(prefix);
    const store = new RedisStore(redis, { prefix });
    const now = Date.now();
    const limits = { deviceRpm: 1, queueMax: 100 };
    await store.queue.admit(makeJob({ deviceId: 'busy', id: 'earlier', priority: 'normal', arrivalMs: now }), limits, now);
    await store.queue.admit(makeJob({ deviceId: 'dup', id: 'seen', priority: 'normal', arrivalMs: now }), { ...limits, deviceRpm: 10 }, now);

    const many = vi.spyOn(library, 'many');
    const invalid = makeJob({ deviceId: 'bad', id: 'nan', priority: 'normal', arrivalMs: now });
    invalid.score = Number.NaN; // not a float to Redis: its enqueue fails inside the call
    const outcomes = await Promise.allSettled([
      store.queue.admit(invalid, limits, now),
      store.queue.admit(makeJob({ deviceId: 'dup', id: 'seen', priority: 'normal', arrivalMs: now }), { ...limits, deviceRpm: 10 }, now),
      store.queue.admit(makeJob({ deviceId: 'busy', id: 'later', priority: 'normal', arrivalMs: now }), limits, now),
      store.queue.admit(makeJob({ deviceId: 'fine', id: 'new', priority: 'normal', arrivalMs: now }), limits, now),
    ]);

    expect(many).toHaveBeenCalledTimes(1);
    expect(many.mock.calls[0]?.[1]).toHaveLength(4);
    expect(outcomes[0]).toMatchObject({ status: 'rejected', reason: { code: 'internal' } });
    expect(outcomes.slice(1)).toEqual([
      { status: 'fulfilled', value: { kind: 'duplicate_pending' } },
      { status: 'fulfilled', value: { kind: 'rate_limited', retryAfterMs: expect.any(Number) } },
      { status: 'fulfilled', value: { kind: 'queued' } },
    ]);
    const k = redisKeys(prefix);
    expect((await redis.zrange(k.queue, '0', '-1')).map(jobKeyOf)).toEqual(['busy/earlier', 'dup/seen', 'fine/new']);
    expect(await redis.exists(k.idem('bad/nan'), k.idem('busy/later'))).toBe(0);
  });
});

/** A queue member's job key (its last field, redis-keys.ts). */
const jobKeyOf = (member: string): string | undefined => member.split('|').at(-1);
