// The Redis store sends the steps of one event-loop turn as one call: each request still gets
// its own answer, and a step that fails fails alone (test/process/redis-batch-stall.test.ts: a
// call that fails fails exactly its steps).
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { library } from '../../bridge/store/lua-library.js';
import { RedisStore } from '../../bridge/store/redis.js';
import { redisKeys } from '../../bridge/store/redis-keys.js';
import { connectRedis, deletePrefix, uniquePrefix } from '../helpers/redis.js';
import { makeJob, makeReply } from './store-contract.js';
import { recordJson } from '../../bridge/store/job-size.js';

const redis = connectRedis();
const prefixes: string[] = [];

afterEach(async () => {
  vi.restoreAllMocks();
  for (const prefix of prefixes.splice(0)) await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

/** A store on a prefix of its own, deleted after the case. */
function open(name: string): { prefix: string; store: RedisStore } {
  const prefix = uniquePrefix(name);
  prefixes.push(prefix);
  return { prefix, store: new RedisStore(redis, { prefix }) };
}

describe('redis store: steps batched per event-loop turn', () => {
  it('admits a turn of requests in one call, each with its own answer: invalid, duplicate, over quota, queued', async () => {
    const { prefix, store } = open('batch');
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
  it("shares the upstream's budget window among a call's admissions: with 3 calls a minute, 3 of 5 are claimed, and the window counts 3", async () => {
    const { prefix, store } = open('batch-budget');
    const now = Date.now();
    const limits = { deviceRpm: 100, queueMax: 100 };
    const claim = { owner: 'inst-1', max: 16, leaseMs: 30_000, rpm: 3, tpm: 1_000_000 };
    const ids = ['a', 'b', 'c', 'd', 'e'];
    const results = await Promise.all(
      ids.map((id) => store.queue.admit(makeJob({ deviceId: `cam-${id}`, id, priority: 'normal', arrivalMs: now }), limits, now, claim)),
    );

    const claimed = results.flatMap((r) => (r.kind === 'queued' ? (r.along?.claim.jobs ?? []).map((j) => j.key) : []));
    expect(claimed).toEqual(['cam-a/a', 'cam-b/b', 'cam-c/c']);
    const k = redisKeys(prefix);
    expect((await redis.zrange(k.queue, '0', '-1')).map(jobKeyOf)).toEqual(['cam-d/d', 'cam-e/e']);
    const window = await redis.hgetall(k.budget);
    const buckets = Object.entries(window).filter(([field]) => field.startsWith('c'));
    expect({ n: window.n, calls: buckets.reduce((sum, [, calls]) => sum + Number(calls), 0) }).toEqual({ n: '3', calls: 3 });
    // A later call reads what the batch wrote: the window is full.
    expect(await store.limits.takeRate(10, 3, 1_000_000, now)).toMatchObject({ ok: false });
  });
  it('counts QUEUE_MAX_BYTES within a call: of three admissions with room for two, the third is queue_full; completions give the bytes back', async () => {
    const { prefix, store } = open('batch-bytes');
    const now = Date.now();
    const jobs = ['a', 'b', 'c'].map((id) => makeJob({ deviceId: 'cam', id, priority: 'normal', arrivalMs: now }));
    const size = Buffer.byteLength(recordJson(jobs[0]!));
    const limits = { deviceRpm: 100, queueMax: 100, queueMaxBytes: 2 * size + size / 2 };
    const results = await Promise.all(jobs.map((job) => store.queue.admit(job, limits, now)));
    expect(results.map((r) => r.kind)).toEqual(['queued', 'queued', 'queue_full']);
    const k = redisKeys(prefix);
    expect(Number(await redis.get(k.qbytes))).toBeGreaterThanOrEqual(2 * size);

    const claimed = await store.queue.claim({ owner: 'inst-1', max: 2, leaseMs: 30_000, rpm: 100, tpm: 1_000_000 }, now);
    await Promise.all(claimed.jobs.map((job) => store.queue.complete(job, makeReply(job), { ttlS: 60, deadLetter: false }, now)));
    expect(await redis.get(k.qbytes)).toBe('0');
  });
});

/** A queue member's job key (its last field, redis-keys.ts). */
const jobKeyOf = (member: string): string | undefined => member.split('|').at(-1);
