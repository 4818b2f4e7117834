// The Store contract: one suite every coordination implementation (memory, Redis) must pass,
// so they cannot drift (DESIGN.md "One coordination interface, two implementations").
//
// Rules the cases keep, so the same suite runs against a shared Redis:
// - every case opens its own store through `makeStore` (a Redis run gives each one its own
//   key prefix), and `cleanup` (default: `store.close()`) runs after the case;
// - time is an argument: every call passes an explicit `now`, relative to a base taken near
//   the real clock (so a backstop TTL on a Redis key is never already in the past); no timers.
import { afterEach, describe, expect, it } from 'vitest';
import { PRIORITIES, type Priority, type Reply } from '../../contract/index.js';
import { DEFAULT_PRIORITY_OFFSETS_MS } from '../../bridge/config/config.js';
import type { AdmitLimits, ClaimedJob, ClaimOptions, Job, Lead, Store } from '../../bridge/store/types.js';
import { jobKey } from '../../bridge/store/types.js';

const MINUTE = 60_000;
const LIMITS: AdmitLimits = { deviceRpm: 1000, queueMax: 1000 };
const DONE = { ttlS: 3600, deadLetter: false };
const LEASE = 30_000;

export interface MakeJobOptions {
  deviceId: string;
  id: string;
  priority: Priority;
  arrivalMs: number;
  /** The class's aging offset; default: PRIORITY_OFFSETS_MS's default for `priority`. */
  offsetMs?: number;
  lock?: string;
  deadlineMs?: number;
  tokenEstimate?: number;
  /** Distinguishes two payloads under one (deviceId, id). */
  content?: string;
}

/** A job built the way intake builds one: score = arrival + the class's offset. */
export function makeJob(o: MakeJobOptions): Job {
  return {
    key: jobKey(o.deviceId, o.id),
    deviceId: o.deviceId,
    id: o.id,
    priority: o.priority,
    request: {
      id: o.id,
      messages: [{ role: 'user', content: o.content ?? `question ${o.id}` }],
      max_tokens: 16,
      ...(o.lock === undefined ? {} : { lock: o.lock }),
    },
    arrivalMs: o.arrivalMs,
    score: o.arrivalMs + (o.offsetMs ?? DEFAULT_PRIORITY_OFFSETS_MS[o.priority]),
    deadlineMs: o.deadlineMs,
    tokenEstimate: o.tokenEstimate ?? 10,
    attempts: 0,
  };
}

export function makeReply(job: Job, content = `answer to ${job.id}`): Reply {
  return {
    id: job.id,
    ok: true,
    model: 'gpt-4o-mini',
    content,
    finish_reason: 'stop',
    usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
    cached: false,
    attempts: 1,
    priority: job.priority,
    timing: { queued_ms: 2, upstream_ms: 40, total_ms: 43 },
  };
}

const errorReply = (job: Job, code: 'expired' | 'upstream_error'): Reply => ({
  id: job.id,
  ok: false,
  priority: job.priority,
  error: { code, message: `${code} for ${job.id}` },
});

/** A base time near the real clock, on a whole minute so window arithmetic reads plainly. */
const baseTime = (): number => Math.floor(Date.now() / MINUTE) * MINUTE;

const leadOneOf = async (store: Store, cacheKey: string, key: string, now: number): Promise<Lead | undefined> =>
  (await store.lead([{ cacheKey, jobKey: key }], LEASE, now))[0];

const claimOpts = (o: Partial<ClaimOptions> = {}): ClaimOptions => ({
  owner: 'worker-1',
  max: 10,
  leaseMs: LEASE,
  rpm: 100_000,
  tpm: undefined,
  ...o,
});

const ids = (jobs: Job[]): string[] => jobs.map((j) => j.id);

/** The job as the store hands it back: the same data (a JSON round trip may drop `undefined` fields). */
const sameJob = (actual: Job, expected: Job): void => {
  const { owner: _o, fence: _f, callId: _c, ...data } = actual as ClaimedJob;
  expect(data).toEqual(expected);
};

export function describeStoreContract(
  name: string,
  makeStore: () => Promise<Store>,
  cleanup?: (store: Store) => Promise<void>,
): void {
  describe(`store contract: ${name}`, () => {
    const opened: Store[] = [];
    const open = async (): Promise<Store> => {
      const store = await makeStore();
      opened.push(store);
      return store;
    };
    afterEach(async () => {
      const stores = opened.splice(0);
      for (const store of stores) await (cleanup ? cleanup(store) : store.close());
    });

    /** Admits jobs that must all be queued. */
    const admitAll = async (store: Store, jobs: Job[], now?: number): Promise<void> => {
      for (const job of jobs) {
        expect(await store.admit(job, LIMITS, now ?? job.arrivalMs)).toEqual({ kind: 'queued' });
      }
    };

    // --- admission and idempotency -----------------------------------------------------

    describe('admission and idempotency', () => {
      it('admits a new job as queued', async () => {
        const store = await open();
        const t = baseTime();
        const job = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'normal', arrivalMs: t });
        expect(await store.admit(job, LIMITS, t)).toEqual({ kind: 'queued' });
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 1, low: 0 });
        expect(await store.storedReply(job.key, t)).toBeUndefined();
      });

      it('answers a repeat of a queued or claimed (deviceId, id) with duplicate_pending, whatever its payload', async () => {
        const store = await open();
        const t = baseTime();
        const job = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'normal', arrivalMs: t });
        const other = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'critical', arrivalMs: t + 5, content: 'something else' });
        await admitAll(store, [job]);
        expect(await store.admit(job, LIMITS, t + 1)).toEqual({ kind: 'duplicate_pending' });
        expect(await store.admit(other, LIMITS, t + 5)).toEqual({ kind: 'duplicate_pending' });
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 1, low: 0 });

        const { jobs } = await store.claim(claimOpts(), t + 10);
        expect(ids(jobs)).toEqual(['r-1']);
        expect(await store.admit(other, LIMITS, t + 20)).toEqual({ kind: 'duplicate_pending' });
        expect((await store.claim(claimOpts(), t + 30)).jobs).toEqual([]);
      });

      it('answers a repeat of a completed job with duplicate_done and exactly the stored reply', async () => {
        const store = await open();
        const t = baseTime();
        const job = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'high', arrivalMs: t });
        await admitAll(store, [job]);
        const [claimed] = (await store.claim(claimOpts(), t + 1)).jobs;
        expect(claimed).toBeDefined();
        const reply = makeReply(job);
        await store.complete(claimed as ClaimedJob, reply, DONE, t + 100);

        const repeat = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'low', arrivalMs: t + 200, content: 'other payload' });
        expect(await store.admit(repeat, LIMITS, t + 200)).toEqual({ kind: 'duplicate_done', reply });
        expect(await store.admit(job, LIMITS, t + 300)).toEqual({ kind: 'duplicate_done', reply });
        expect(await store.storedReply(job.key, t + 300)).toEqual(reply);
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
      });

      it('admits the key again once the idempotency ttl has passed', async () => {
        const store = await open();
        const t = baseTime();
        const job = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'normal', arrivalMs: t });
        await admitAll(store, [job]);
        const [claimed] = (await store.claim(claimOpts(), t)).jobs;
        const reply = makeReply(job);
        await store.complete(claimed as ClaimedJob, reply, { ttlS: 1, deadLetter: false }, t + 10);

        expect(await store.admit(job, LIMITS, t + 10 + 999)).toEqual({ kind: 'duplicate_done', reply });
        expect(await store.storedReply(job.key, t + 10 + 999)).toEqual(reply);
        expect(await store.storedReply(job.key, t + 10 + 1001)).toBeUndefined();
        const again = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'normal', arrivalMs: t + 10 + 1001 });
        expect(await store.admit(again, LIMITS, t + 10 + 1001)).toEqual({ kind: 'queued' });
        expect(await store.admit(again, LIMITS, t + 10 + 1002)).toEqual({ kind: 'duplicate_pending' });
      });

      it('keeps the same id on different devices independent', async () => {
        const store = await open();
        const t = baseTime();
        const a = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'normal', arrivalMs: t });
        const b = makeJob({ deviceId: 'cam-2', id: 'r-1', priority: 'normal', arrivalMs: t + 1 });
        await admitAll(store, [a, b]);
        const { jobs } = await store.claim(claimOpts({ max: 1 }), t + 2);
        expect(jobs.map((j) => j.key)).toEqual([a.key]);
        await store.complete(jobs[0] as ClaimedJob, makeReply(a), DONE, t + 3);

        expect(await store.admit(a, LIMITS, t + 4)).toEqual({ kind: 'duplicate_done', reply: makeReply(a) });
        expect(await store.admit(b, LIMITS, t + 4)).toEqual({ kind: 'duplicate_pending' });
        expect(await store.storedReply(b.key, t + 4)).toBeUndefined();
        const c = makeJob({ deviceId: 'cam-3', id: 'r-1', priority: 'normal', arrivalMs: t + 5 });
        expect(await store.admit(c, LIMITS, t + 5)).toEqual({ kind: 'queued' });
      });
    });

    // --- device quota ------------------------------------------------------------------

    describe('device quota', () => {
      const quota: AdmitLimits = { deviceRpm: 3, queueMax: 1000 };

      it('admits deviceRpm jobs in 60 s, then answers rate_limited with the exact wait for the oldest to leave', async () => {
        const store = await open();
        const t = baseTime();
        for (let i = 0; i < 3; i += 1) {
          const job = makeJob({ deviceId: 'cam-1', id: `r-${i}`, priority: 'normal', arrivalMs: t + i * 1000 });
          expect(await store.admit(job, quota, job.arrivalMs)).toEqual({ kind: 'queued' });
        }
        const over = makeJob({ deviceId: 'cam-1', id: 'r-3', priority: 'normal', arrivalMs: t + 10_000 });
        expect(await store.admit(over, quota, t + 10_000)).toEqual({ kind: 'rate_limited', retryAfterMs: 50_000 });
        expect(await store.admit(over, quota, t + 59_999)).toEqual({ kind: 'rate_limited', retryAfterMs: 1 });
      });

      it('leaves other devices unaffected by one device being over its quota', async () => {
        const store = await open();
        const t = baseTime();
        for (let i = 0; i < 3; i += 1) {
          await store.admit(makeJob({ deviceId: 'cam-1', id: `r-${i}`, priority: 'normal', arrivalMs: t }), quota, t);
        }
        const over = makeJob({ deviceId: 'cam-1', id: 'r-9', priority: 'normal', arrivalMs: t + 1 });
        expect((await store.admit(over, quota, t + 1)).kind).toBe('rate_limited');
        for (let i = 0; i < 3; i += 1) {
          const job = makeJob({ deviceId: 'cam-2', id: `r-${i}`, priority: 'normal', arrivalMs: t + 2 });
          expect(await store.admit(job, quota, t + 2)).toEqual({ kind: 'queued' });
        }
      });

      it('rolls the window: an admission at t leaves it at t + 60000, and rejected attempts use no quota', async () => {
        const store = await open();
        const t = baseTime();
        for (let i = 0; i < 3; i += 1) {
          const job = makeJob({ deviceId: 'cam-1', id: `r-${i}`, priority: 'normal', arrivalMs: t + i * 1000 });
          await store.admit(job, quota, job.arrivalMs);
        }
        const next = (id: string, at: number): Job => makeJob({ deviceId: 'cam-1', id, priority: 'normal', arrivalMs: at });
        expect((await store.admit(next('r-3', t + 59_999), quota, t + 59_999)).kind).toBe('rate_limited');
        expect(await store.admit(next('r-3', t + 60_000), quota, t + 60_000)).toEqual({ kind: 'queued' });
        // Full again (t+1000, t+2000, t+60000): the next slot is t+1000's, at t+61000.
        expect(await store.admit(next('r-4', t + 60_001), quota, t + 60_001)).toEqual({ kind: 'rate_limited', retryAfterMs: 999 });
        expect(await store.admit(next('r-4', t + 61_000), quota, t + 61_000)).toEqual({ kind: 'queued' });
      });

      it('creates no idempotency record and uses no quota for a rate_limited or queue_full admission', async () => {
        const store = await open();
        const t = baseTime();
        const limits: AdmitLimits = { deviceRpm: 1, queueMax: 1 };
        const a1 = makeJob({ deviceId: 'cam-1', id: 'a-1', priority: 'normal', arrivalMs: t });
        const a2 = makeJob({ deviceId: 'cam-1', id: 'a-2', priority: 'normal', arrivalMs: t + 1 });
        const b1 = makeJob({ deviceId: 'cam-2', id: 'b-1', priority: 'normal', arrivalMs: t + 2 });
        expect(await store.admit(a1, limits, t)).toEqual({ kind: 'queued' });
        expect((await store.admit(a2, limits, t + 1)).kind).toBe('rate_limited');
        expect(await store.admit(b1, limits, t + 2)).toEqual({ kind: 'queue_full' });
        expect(await store.storedReply(a2.key, t + 3)).toBeUndefined();
        expect(await store.storedReply(b1.key, t + 3)).toBeUndefined();

        // Room in the queue again: cam-2's quota was not used by its queue_full attempt.
        expect(ids((await store.claim(claimOpts(), t + 3)).jobs)).toEqual(['a-1']);
        expect(await store.admit(b1, limits, t + 4)).toEqual({ kind: 'queued' });
        expect(ids((await store.claim(claimOpts(), t + 5)).jobs)).toEqual(['b-1']);
        // cam-1's quota frees at t + 60000: the rate-limited key is new, not a duplicate.
        expect(await store.admit(a2, limits, t + MINUTE)).toEqual({ kind: 'queued' });
      });
    });

    // --- queueMax ----------------------------------------------------------------------

    describe('queueMax', () => {
      it('counts queued and parked jobs, not claimed ones, and answers queue_full over it', async () => {
        const store = await open();
        const t = baseTime();
        const a = makeJob({ deviceId: 'cam-1', id: 'a', priority: 'normal', arrivalMs: t, lock: 'x' });
        const b = makeJob({ deviceId: 'cam-1', id: 'b', priority: 'normal', arrivalMs: t + 1, lock: 'x' });
        await admitAll(store, [a, b]);
        expect(ids((await store.claim(claimOpts(), t + 2)).jobs)).toEqual(['a']); // b is parked behind a
        const limits: AdmitLimits = { deviceRpm: 1000, queueMax: 2 };
        const c = makeJob({ deviceId: 'cam-2', id: 'c', priority: 'normal', arrivalMs: t + 3 });
        const d = makeJob({ deviceId: 'cam-2', id: 'd', priority: 'normal', arrivalMs: t + 4 });
        expect(await store.admit(c, limits, t + 3)).toEqual({ kind: 'queued' });
        expect(await store.admit(d, limits, t + 4)).toEqual({ kind: 'queue_full' });
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 2, low: 0 });
      });

      it('admits again once a claim frees room', async () => {
        const store = await open();
        const t = baseTime();
        const limits: AdmitLimits = { deviceRpm: 1000, queueMax: 2 };
        const jobs = ['a', 'b', 'c'].map((id, i) => makeJob({ deviceId: 'cam-1', id, priority: 'normal', arrivalMs: t + i }));
        expect(await store.admit(jobs[0] as Job, limits, t)).toEqual({ kind: 'queued' });
        expect(await store.admit(jobs[1] as Job, limits, t + 1)).toEqual({ kind: 'queued' });
        expect(await store.admit(jobs[2] as Job, limits, t + 2)).toEqual({ kind: 'queue_full' });
        expect(ids((await store.claim(claimOpts({ max: 1 }), t + 3)).jobs)).toEqual(['a']);
        expect(await store.admit(jobs[2] as Job, limits, t + 4)).toEqual({ kind: 'queued' });
        expect(await store.admit(makeJob({ deviceId: 'cam-1', id: 'd', priority: 'normal', arrivalMs: t + 5 }), limits, t + 5)).toEqual({
          kind: 'queue_full',
        });
      });
    });

    // --- admission with a claim along ---------------------------------------------------

    describe('admission with a claim along', () => {
      it('claims right after enqueueing: the admitted job when it is the best, leased as claim() would', async () => {
        const store = await open();
        const t = baseTime();
        const job = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t });
        const result = await store.admit(job, LIMITS, t, claimOpts({ owner: 'me', max: 4 }));
        if (result.kind !== 'queued' || !result.along) throw new Error(`expected queued with a claim, got ${JSON.stringify(result)}`);
        expect(ids(result.along.claim.jobs)).toEqual(['a']);
        const held = result.along.claim.jobs[0] as ClaimedJob;
        sameJob(held, job);
        expect(held.owner).toBe('me');
        expect(result.along.lead).toBeUndefined(); // no cache key: it never shares its call
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
        expect(await store.renew('me', ['d1/a'], LEASE, t + 1)).toEqual([true]);
        expect(await store.claim(claimOpts(), t + 2)).toEqual({ jobs: [], expired: [], retryAtMs: undefined });
        // Without a claim, admission stays as it was.
        expect(await store.admit(makeJob({ deviceId: 'd1', id: 'b', priority: 'normal', arrivalMs: t }), LIMITS, t + 3)).toEqual({ kind: 'queued' });
      });

      it('takes the best jobs, not necessarily the admitted one', async () => {
        const store = await open();
        const t = baseTime();
        const critical = makeJob({ deviceId: 'd1', id: 'c', priority: 'critical', arrivalMs: t });
        await admitAll(store, [critical], t);
        const low = { ...makeJob({ deviceId: 'd3', id: 'l', priority: 'low', arrivalMs: t + 10 }), cacheKey: 'k-low' };
        const result = await store.admit(low, LIMITS, t + 10, claimOpts({ owner: 'me', max: 1 }));
        if (result.kind !== 'queued' || !result.along) throw new Error('expected queued with a claim');
        expect(ids(result.along.claim.jobs)).toEqual(['c']);
        expect(result.along.lead).toBeUndefined(); // the admitted job was not claimed
        expect(ids((await store.claim(claimOpts({ max: 5 }), t + 11)).jobs)).toEqual(['l']);
      });

      it("gives the admitted job its first coalescing step when the claim took it", async () => {
        const store = await open();
        const t = baseTime();
        const first = { ...makeJob({ deviceId: 'd1', id: 'x', priority: 'normal', arrivalMs: t }), cacheKey: 'same' };
        const r1 = await store.admit(first, LIMITS, t, claimOpts({ owner: 'me' }));
        expect(r1.kind === 'queued' && r1.along?.lead).toEqual({ leader: 'd1/x' });
        const second = { ...makeJob({ deviceId: 'd2', id: 'y', priority: 'normal', arrivalMs: t + 1 }), cacheKey: 'same' };
        const r2 = await store.admit(second, LIMITS, t + 1, claimOpts({ owner: 'me' }));
        expect(r2.kind === 'queued' && r2.along?.lead).toEqual({ leader: 'd1/x' }); // it follows the first
        expect(await leadOneOf(store, 'same', 'd3/z', t + 2)).toEqual({ leader: 'd1/x' });
      });

      it('claims nothing past the upstream rate budget and says when to retry; refusals claim nothing', async () => {
        const store = await open();
        const t = baseTime();
        await admitAll(store, [makeJob({ deviceId: 'd1', id: 'first', priority: 'normal', arrivalMs: t })], t);
        expect(ids((await store.claim(claimOpts({ rpm: 1 }), t + 1)).jobs)).toEqual(['first']);
        const job = makeJob({ deviceId: 'd2', id: 'second', priority: 'normal', arrivalMs: t + 2 });
        const result = await store.admit(job, LIMITS, t + 2, claimOpts({ rpm: 1 }));
        if (result.kind !== 'queued' || !result.along) throw new Error('expected queued with a claim');
        expect(result.along.claim.jobs).toEqual([]);
        expect(result.along.claim.retryAtMs).toBe(t + 1 + 60_000);
        expect(await store.admit(job, LIMITS, t + 3, claimOpts())).toEqual({ kind: 'duplicate_pending' });
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 1, low: 0 });
      });
    });

    // --- claim order -------------------------------------------------------------------

    describe('claim order', () => {
      it('claims the smallest score first', async () => {
        const store = await open();
        const t = baseTime();
        await admitAll(
          store,
          [
            makeJob({ deviceId: 'd1', id: 'n', priority: 'normal', arrivalMs: t }), // t+5000
            makeJob({ deviceId: 'd2', id: 'h', priority: 'high', arrivalMs: t + 1 }), // t+2001
            makeJob({ deviceId: 'd3', id: 'l', priority: 'low', arrivalMs: t + 2 }), // t+15002
            makeJob({ deviceId: 'd4', id: 'c', priority: 'critical', arrivalMs: t + 3 }), // t+3
          ],
          t + 3,
        );
        const order: string[] = [];
        for (let i = 0; i < 4; i += 1) order.push(...ids((await store.claim(claimOpts({ max: 1 }), t + 10 + i)).jobs));
        expect(order).toEqual(['c', 'h', 'n', 'l']);
      });

      it('claims equal scores in admission order', async () => {
        const store = await open();
        const t = baseTime();
        // Neither key order nor id order matches admission order.
        const jobs = [
          makeJob({ deviceId: 'm', id: 'z', priority: 'normal', arrivalMs: t }),
          makeJob({ deviceId: 'z', id: 'a', priority: 'normal', arrivalMs: t }),
          makeJob({ deviceId: 'a', id: 'm', priority: 'normal', arrivalMs: t }),
          makeJob({ deviceId: 'b', id: 'b', priority: 'high', arrivalMs: t + 3000 }), // same score t+5000
        ];
        await admitAll(store, jobs, t);
        const first = await store.claim(claimOpts({ max: 2 }), t + 1);
        const rest = await store.claim(claimOpts({ max: 10 }), t + 2);
        expect([...ids(first.jobs), ...ids(rest.jobs)]).toEqual(['z', 'a', 'm', 'b']);
      });

      it('ages a low job ahead of a critical one that arrived more than 15 s later, not of one that arrived earlier', async () => {
        const store = await open();
        const t = baseTime();
        const low = makeJob({ deviceId: 'd-low', id: 'low', priority: 'low', arrivalMs: t }); // t+15000
        const critEarlier = makeJob({ deviceId: 'd-c1', id: 'crit-earlier', priority: 'critical', arrivalMs: t - 1 });
        const critWithin = makeJob({ deviceId: 'd-c2', id: 'crit-14999', priority: 'critical', arrivalMs: t + 14_999 });
        const critLater = makeJob({ deviceId: 'd-c3', id: 'crit-15001', priority: 'critical', arrivalMs: t + 15_001 });
        const highLater = makeJob({ deviceId: 'd-h', id: 'high-13001', priority: 'high', arrivalMs: t + 13_001 }); // t+15001
        // All admitted at once, latest first, so only the score can explain the order.
        for (const job of [critLater, highLater, critWithin, low, critEarlier]) {
          expect(await store.admit(job, LIMITS, t + 15_001)).toEqual({ kind: 'queued' });
        }
        const order: string[] = [];
        for (let i = 0; i < 5; i += 1) order.push(...ids((await store.claim(claimOpts({ max: 1 }), t + 20_000 + i)).jobs));
        expect(order).toEqual(['crit-earlier', 'crit-14999', 'low', 'crit-15001', 'high-13001']);
      });

      it('honours the score it is given (offsets are the caller\'s)', async () => {
        const store = await open();
        const t = baseTime();
        const low = makeJob({ deviceId: 'd1', id: 'low', priority: 'low', arrivalMs: t, offsetMs: 100 });
        const crit = makeJob({ deviceId: 'd2', id: 'crit', priority: 'critical', arrivalMs: t + 101, offsetMs: 0 });
        await admitAll(store, [crit, low], t + 101);
        expect(ids((await store.claim(claimOpts(), t + 200)).jobs)).toEqual(['low', 'crit']);
      });

      it('returns at most max jobs per claim, and many at once when they are ready', async () => {
        const store = await open();
        const t = baseTime();
        const jobs = Array.from({ length: 7 }, (_, i) => makeJob({ deviceId: `d${i}`, id: `r${i}`, priority: 'normal', arrivalMs: t + i }));
        await admitAll(store, jobs);
        const first = await store.claim(claimOpts({ max: 2 }), t + 10);
        expect(ids(first.jobs)).toEqual(['r0', 'r1']);
        const second = await store.claim(claimOpts({ max: 100 }), t + 11);
        expect(ids(second.jobs)).toEqual(['r2', 'r3', 'r4', 'r5', 'r6']);
        const third = await store.claim(claimOpts({ max: 100 }), t + 12);
        expect(third).toEqual({ jobs: [], expired: [], retryAtMs: undefined });
      });

      it('hands out the job as admitted, leased to the claiming owner', async () => {
        const store = await open();
        const t = baseTime();
        const job = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'high', arrivalMs: t, deadlineMs: t + 9000, tokenEstimate: 77 });
        const locked = makeJob({ deviceId: 'cam-1', id: 'r-2', priority: 'high', arrivalMs: t + 1, lock: 'line-3/arm' });
        await admitAll(store, [job, locked]);
        const { jobs } = await store.claim(claimOpts({ owner: 'instance-a:1' }), t + 2);
        expect(jobs).toHaveLength(2);
        sameJob(jobs[0] as Job, job);
        sameJob(jobs[1] as Job, locked);
        expect(jobs[0]?.owner).toBe('instance-a:1');
        expect(jobs[0]?.fence).toBeUndefined();
        expect(jobs[1]?.owner).toBe('instance-a:1');
        expect(typeof jobs[1]?.fence).toBe('number');
        expect(jobs[0]?.callId).not.toBe(jobs[1]?.callId);
      });

      it('settles a call with the tokens the upstream reported, freeing or using tpm budget', async () => {
        const store = await open();
        const t = baseTime();
        const big = makeJob({ deviceId: 'd1', id: 'big', priority: 'high', arrivalMs: t, tokenEstimate: 900 });
        const next = makeJob({ deviceId: 'd1', id: 'next', priority: 'high', arrivalMs: t + 1, tokenEstimate: 500 });
        await admitAll(store, [big, next]);
        const first = await store.claim(claimOpts({ tpm: 1000 }), t + 2);
        expect(ids(first.jobs)).toEqual(['big']); // 900 + 500 > 1000
        // The upstream used far less than estimated: the rest of the budget opens up.
        await store.settleTokens((first.jobs[0] as ClaimedJob).callId, 100);
        expect(ids((await store.claim(claimOpts({ tpm: 1000 }), t + 3)).jobs)).toEqual(['next']);
        // And a call that used more than estimated takes more budget.
        const take = await store.takeRate(10, 100, 1000, t + 4);
        if (!take.ok) throw new Error('expected budget');
        await store.settleTokens(take.callId, 450);
        expect((await store.takeRate(10, 100, 1000, t + 5)).ok).toBe(false); // 100 + 500 + 450 + 10 > 1000
        // Settling a call that left the window changes nothing: the budget counts only the
        // calls still in it (here one of 900 tokens, taken after the others left).
        const later = t + 4 + 60_001;
        expect((await store.takeRate(900, 100, 1000, later)).ok).toBe(true);
        await store.settleTokens(take.callId, 0);
        expect((await store.takeRate(200, 100, 1000, later + 1)).ok).toBe(false); // 900 + 200 > 1000
      });
    });

    // --- locks -------------------------------------------------------------------------

    describe('locks', () => {
      it('never grants one lock to two jobs at once', async () => {
        const store = await open();
        const t = baseTime();
        const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t, lock: 'x' });
        const b = makeJob({ deviceId: 'd2', id: 'b', priority: 'normal', arrivalMs: t + 1, lock: 'x' });
        await admitAll(store, [a, b]);
        expect(ids((await store.claim(claimOpts({ max: 2 }), t + 2)).jobs)).toEqual(['a']);
        expect((await store.claim(claimOpts({ max: 2, owner: 'worker-2' }), t + 3)).jobs).toEqual([]);
        expect((await store.claim(claimOpts({ max: 2 }), t + 1000)).jobs).toEqual([]);
      });

      it('parks a job behind a held lock without blocking the jobs behind it', async () => {
        const store = await open();
        const t = baseTime();
        const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t, lock: 'x' });
        const b = makeJob({ deviceId: 'd2', id: 'b', priority: 'normal', arrivalMs: t + 1, lock: 'x' });
        const c = makeJob({ deviceId: 'd3', id: 'c', priority: 'normal', arrivalMs: t + 2 });
        const d = makeJob({ deviceId: 'd4', id: 'd', priority: 'normal', arrivalMs: t + 3, lock: 'y' });
        await admitAll(store, [a, b, c, d]);
        expect(ids((await store.claim(claimOpts({ max: 3 }), t + 4)).jobs)).toEqual(['a', 'c', 'd']);
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 1, low: 0 }); // b, parked
        const e = makeJob({ deviceId: 'd5', id: 'e', priority: 'normal', arrivalMs: t + 5 });
        await admitAll(store, [e]);
        expect(ids((await store.claim(claimOpts({ max: 3 }), t + 6)).jobs)).toEqual(['e']);
      });

      it('hands the lock to the next parked job when the holder completes, with a higher fence', async () => {
        const store = await open();
        const t = baseTime();
        const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t, lock: 'x' });
        const b = makeJob({ deviceId: 'd2', id: 'b', priority: 'normal', arrivalMs: t + 1, lock: 'x' });
        const c = makeJob({ deviceId: 'd3', id: 'c', priority: 'normal', arrivalMs: t + 2, lock: 'x' });
        await admitAll(store, [a, b, c]);
        const [ha] = (await store.claim(claimOpts(), t + 3)).jobs;
        expect(ha?.id).toBe('a');
        expect((await store.claim(claimOpts(), t + 4)).jobs).toEqual([]);

        await store.complete(ha as ClaimedJob, makeReply(a), DONE, t + 5);
        const second = await store.claim(claimOpts(), t + 6);
        expect(ids(second.jobs)).toEqual(['b']);
        const hb = second.jobs[0] as ClaimedJob;
        expect(hb.fence).toBeGreaterThan(ha?.fence as number);

        await store.complete(hb, makeReply(b), DONE, t + 7);
        const third = await store.claim(claimOpts(), t + 8);
        expect(ids(third.jobs)).toEqual(['c']);
        expect(third.jobs[0]?.fence).toBeGreaterThan(hb.fence as number);
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
      });

      it('raises fences by one per grant of a key, independently between keys', async () => {
        const store = await open();
        const t = baseTime();
        const fences: Record<string, number[]> = { x: [], y: [] };
        const grant = async (lock: string, id: string, at: number): Promise<void> => {
          const job = makeJob({ deviceId: 'd1', id, priority: 'normal', arrivalMs: at, lock });
          await admitAll(store, [job]);
          const { jobs } = await store.claim(claimOpts(), at);
          expect(ids(jobs)).toEqual([id]);
          const held = jobs[0] as ClaimedJob;
          expect(typeof held.fence).toBe('number');
          fences[lock]?.push(held.fence as number);
          await store.complete(held, makeReply(job), DONE, at);
        };
        await grant('y', 'y1', t);
        await grant('x', 'x1', t + 1);
        await grant('x', 'x2', t + 2);
        await grant('x', 'x3', t + 3);
        await grant('y', 'y2', t + 4);
        const [x1, x2, x3] = fences.x as [number, number, number];
        const [y1, y2] = fences.y as [number, number];
        expect([x2 - x1, x3 - x2]).toEqual([1, 1]);
        expect(y2 - y1).toBe(1);
      });

      it('frees the lock when the holder\'s lease expires and is reaped; the next holder gets a higher fence', async () => {
        const store = await open();
        const t = baseTime();
        const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t, lock: 'x' });
        const b = makeJob({ deviceId: 'd2', id: 'b', priority: 'normal', arrivalMs: t + 1, lock: 'x' });
        await admitAll(store, [a, b]);
        const [ha] = (await store.claim(claimOpts({ leaseMs: 1000 }), t + 2)).jobs;
        expect(ha?.id).toBe('a');
        expect((await store.claim(claimOpts(), t + 3)).jobs).toEqual([]);

        const exhausted = await store.reap(1, t + 2 + 1001);
        expect(ids(exhausted)).toEqual(['a']);
        const { jobs } = await store.claim(claimOpts({ owner: 'worker-2' }), t + 2 + 1002);
        expect(ids(jobs)).toEqual(['b']);
        expect(jobs[0]?.fence).toBeGreaterThan(ha?.fence as number);
      });

      it('gives a reaped and requeued holder a fresh grant with a higher fence, ahead of a later job', async () => {
        const store = await open();
        const t = baseTime();
        const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t, lock: 'x' });
        const b = makeJob({ deviceId: 'd2', id: 'b', priority: 'normal', arrivalMs: t + 1, lock: 'x' });
        await admitAll(store, [a, b]);
        const [ha] = (await store.claim(claimOpts({ leaseMs: 1000 }), t + 2)).jobs;
        expect(await store.reap(3, t + 2 + 1001)).toEqual([]);
        const again = await store.claim(claimOpts({ owner: 'worker-2' }), t + 2 + 1002);
        expect(ids(again.jobs)).toEqual(['a']);
        expect(again.jobs[0]?.attempts).toBe(1);
        expect(again.jobs[0]?.fence).toBeGreaterThan(ha?.fence as number);
        await store.complete(again.jobs[0] as ClaimedJob, makeReply(a), DONE, t + 3000);
        const last = await store.claim(claimOpts(), t + 3001);
        expect(ids(last.jobs)).toEqual(['b']);
        expect(last.jobs[0]?.fence).toBeGreaterThan(again.jobs[0]?.fence as number);
      });

      it('loses and duplicates no job when a claim meets a lock whose holder\'s lease expired before any reap', async () => {
        const store = await open();
        const t = baseTime();
        const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t, lock: 'x' });
        const b = makeJob({ deviceId: 'd2', id: 'b', priority: 'normal', arrivalMs: t + 1, lock: 'x' });
        await admitAll(store, [a, b]);
        const [ha] = (await store.claim(claimOpts({ leaseMs: 1000 }), t + 2)).jobs;
        expect(ha?.id).toBe('a');
        expect((await store.claim(claimOpts(), t + 3)).jobs).toEqual([]); // b parked behind a
        const c = makeJob({ deviceId: 'd3', id: 'c', priority: 'normal', arrivalMs: t + 4, lock: 'x' });
        await admitAll(store, [c]);

        // a's lease ran out at t+1002; nobody has reaped yet.
        let now = t + 2000;
        const granted: ClaimedJob[] = [ha as ClaimedJob];
        for (let round = 0; round < 8; round += 1) {
          const { jobs } = await store.claim(claimOpts({ max: 10 }), now);
          expect(jobs.length).toBeLessThanOrEqual(1); // one holder of x at a time
          for (const held of jobs) {
            granted.push(held);
            await store.complete(held, makeReply(held), DONE, now);
          }
          await store.reap(3, now);
          now += 1;
        }
        expect(granted.slice(1).map((j) => j.id).sort()).toEqual(['a', 'b', 'c']);
        const fences = granted.map((j) => j.fence as number);
        for (let i = 1; i < fences.length; i += 1) expect(fences[i]).toBeGreaterThan(fences[i - 1] as number);
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
      });
    });

    // --- upstream rate limits ----------------------------------------------------------

    describe('upstream rate limits', () => {
      const queueN = async (store: Store, n: number, t: number, tokenEstimate?: number): Promise<Job[]> => {
        const jobs = Array.from({ length: n }, (_, i) =>
          makeJob({ deviceId: `d${i}`, id: `r${i}`, priority: 'normal', arrivalMs: t + i, ...(tokenEstimate === undefined ? {} : { tokenEstimate }) }),
        );
        await admitAll(store, jobs);
        return jobs;
      };

      it('claims at most rpm jobs in any 60 s window, and says when the oldest call leaves it', async () => {
        const store = await open();
        const t = baseTime();
        await queueN(store, 6, t);
        const opts = claimOpts({ rpm: 3, max: 1 });
        expect(ids((await store.claim(opts, t + 10)).jobs)).toEqual(['r0']);
        expect(ids((await store.claim(opts, t + 10_000)).jobs)).toEqual(['r1']);
        expect(ids((await store.claim(opts, t + 20_000)).jobs)).toEqual(['r2']);
        expect(await store.claim(opts, t + 30_000)).toEqual({ jobs: [], expired: [], retryAtMs: t + 10 + MINUTE });
        expect(await store.claim(opts, t + 9 + MINUTE)).toEqual({ jobs: [], expired: [], retryAtMs: t + 10 + MINUTE });

        const rolled = await store.claim(claimOpts({ rpm: 3, max: 10 }), t + 10 + MINUTE);
        expect(ids(rolled.jobs)).toEqual(['r3']);
        const blocked = await store.claim(claimOpts({ rpm: 3, max: 10 }), t + 10 + MINUTE + 1);
        expect(blocked).toEqual({ jobs: [], expired: [], retryAtMs: t + 10_000 + MINUTE });
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 2, low: 0 });
      });

      it('claims no more than rpm jobs in one call', async () => {
        const store = await open();
        const t = baseTime();
        await queueN(store, 5, t);
        expect(ids((await store.claim(claimOpts({ rpm: 2, max: 10 }), t + 10)).jobs)).toEqual(['r0', 'r1']);
        expect(await store.claim(claimOpts({ rpm: 2, max: 10 }), t + 11)).toEqual({ jobs: [], expired: [], retryAtMs: t + 10 + MINUTE });
      });

      it('limits the summed tokenEstimate of claims in 60 s to tpm', async () => {
        const store = await open();
        const t = baseTime();
        await queueN(store, 4, t, 400);
        const opts = claimOpts({ tpm: 1000, max: 1 });
        expect(ids((await store.claim(opts, t + 10)).jobs)).toEqual(['r0']);
        expect(ids((await store.claim(opts, t + 5000)).jobs)).toEqual(['r1']);
        // 800 used; another 400 needs r0's 400 out of the window.
        expect(await store.claim(opts, t + 6000)).toEqual({ jobs: [], expired: [], retryAtMs: t + 10 + MINUTE });
        expect(ids((await store.claim(opts, t + 10 + MINUTE)).jobs)).toEqual(['r2']);
        expect(await store.claim(opts, t + 11 + MINUTE)).toEqual({ jobs: [], expired: [], retryAtMs: t + 5000 + MINUTE });
      });

      it('lets a job larger than tpm run alone once the window is empty', async () => {
        const store = await open();
        const t = baseTime();
        await queueN(store, 2, t, 5000);
        const opts = claimOpts({ tpm: 1000, max: 10 });
        expect(ids((await store.claim(opts, t + 10)).jobs)).toEqual(['r0']);
        const blocked = await store.claim(opts, t + 20);
        expect(blocked.jobs).toEqual([]);
        expect(blocked.retryAtMs).toBe(t + 10 + MINUTE);
        expect(ids((await store.claim(opts, t + 10 + MINUTE)).jobs)).toEqual(['r1']);
      });

      it('takeRate spends and respects the same rpm budget as claim', async () => {
        const store = await open();
        const t = baseTime();
        await queueN(store, 1, t);
        expect(ids((await store.claim(claimOpts({ rpm: 2 }), t + 10)).jobs)).toEqual(['r0']);
        expect((await store.takeRate(10, 2, undefined, t + 20)).ok).toBe(true);
        // The claim's token and the retry's token fill rpm 2: the next retry waits for the claim's to leave.
        expect(await store.takeRate(10, 2, undefined, t + 30)).toEqual({ ok: false, retryAtMs: t + 10 + MINUTE });
        expect(await store.takeRate(10, 2, undefined, t + 9 + MINUTE)).toEqual({ ok: false, retryAtMs: t + 10 + MINUTE });
        expect((await store.takeRate(10, 2, undefined, t + 10 + MINUTE)).ok).toBe(true);
        expect(await store.takeRate(10, 2, undefined, t + 11 + MINUTE)).toEqual({ ok: false, retryAtMs: t + 20 + MINUTE });
      });

      it('shares one budget between takeRate and claim, for rpm and tpm alike', async () => {
        const store = await open();
        const t = baseTime();
        await queueN(store, 1, t, 300);
        expect((await store.takeRate(300, 2, 1000, t + 10)).ok).toBe(true);
        expect((await store.takeRate(300, 2, 1000, t + 20)).ok).toBe(true);
        // rpm 2 spent by takeRate: claim waits for the first call to leave the window.
        expect(await store.claim(claimOpts({ rpm: 2, tpm: 1000 }), t + 30)).toEqual({ jobs: [], expired: [], retryAtMs: t + 10 + MINUTE });
        expect(ids((await store.claim(claimOpts({ rpm: 3, tpm: 1000 }), t + 40)).jobs)).toEqual(['r0']);
        // 900 tokens used: 300 more would exceed tpm 1000 until the first 300 leave.
        expect(await store.takeRate(300, 10, 1000, t + 50)).toEqual({ ok: false, retryAtMs: t + 10 + MINUTE });
        expect((await store.takeRate(100, 10, 1000, t + 60)).ok).toBe(true);
        expect(await store.takeRate(1, 10, 1000, t + 70)).toEqual({ ok: false, retryAtMs: t + 10 + MINUTE });
        expect((await store.takeRate(300, 10, 1000, t + 10 + MINUTE)).ok).toBe(true);
      });

      it('pauseUpstream stops claims and takeRate until the pause ends, and a shorter pause does not shorten it', async () => {
        const store = await open();
        const t = baseTime();
        await queueN(store, 2, t);
        await store.pauseUpstream(t + 5000);
        await store.pauseUpstream(t + 3000);
        expect(await store.claim(claimOpts(), t + 10)).toEqual({ jobs: [], expired: [], retryAtMs: t + 5000 });
        expect(await store.takeRate(10, 100, undefined, t + 20)).toEqual({ ok: false, retryAtMs: t + 5000 });
        expect(await store.claim(claimOpts(), t + 4999)).toEqual({ jobs: [], expired: [], retryAtMs: t + 5000 });
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 2, low: 0 });
        // The pause took no budget: with rpm 2 both jobs go at its end.
        expect(ids((await store.claim(claimOpts({ rpm: 2 }), t + 5000)).jobs)).toEqual(['r0', 'r1']);
      });

      it('lets takeRate succeed once the pause ends', async () => {
        const store = await open();
        const t = baseTime();
        await store.pauseUpstream(t + 1000);
        expect((await store.takeRate(10, 1, undefined, t + 999)).ok).toBe(false);
        expect((await store.takeRate(10, 1, undefined, t + 1000)).ok).toBe(true);
        expect(await store.takeRate(10, 1, undefined, t + 1001)).toEqual({ ok: false, retryAtMs: t + 1000 + MINUTE });
      });
    });

    // --- expiry --------------------------------------------------------------------------

    describe('expiry', () => {
      it('returns a queued job whose deadline has come in expired, not in jobs, and drops it from the queue', async () => {
        const store = await open();
        const t = baseTime();
        const dead = makeJob({ deviceId: 'd1', id: 'dead', priority: 'critical', arrivalMs: t, deadlineMs: t + 1000 });
        const alive = makeJob({ deviceId: 'd2', id: 'alive', priority: 'critical', arrivalMs: t + 1, deadlineMs: t + 1001 });
        const plain = makeJob({ deviceId: 'd3', id: 'plain', priority: 'normal', arrivalMs: t + 2 });
        await admitAll(store, [dead, alive, plain]);
        // rpm 2: the expired job takes no rate token.
        const result = await store.claim(claimOpts({ rpm: 2 }), t + 1000);
        expect(ids(result.expired)).toEqual(['dead']);
        sameJob(result.expired[0] as Job, dead);
        expect(ids(result.jobs)).toEqual(['alive', 'plain']);
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
        expect(await store.claim(claimOpts(), t + 1001)).toEqual({ jobs: [], expired: [], retryAtMs: undefined });
        expect(await store.admit(dead, LIMITS, t + 1002)).toEqual({ kind: 'duplicate_pending' });
      });

      it('stores the reply of a completed expired job for its duplicates', async () => {
        const store = await open();
        const t = baseTime();
        const job = makeJob({ deviceId: 'd1', id: 'r-1', priority: 'low', arrivalMs: t, deadlineMs: t + 500 });
        await admitAll(store, [job]);
        const { expired } = await store.claim(claimOpts(), t + 600);
        expect(ids(expired)).toEqual(['r-1']);
        const reply = errorReply(job, 'expired');
        await store.complete(expired[0] as Job, reply, DONE, t + 601);
        expect(await store.admit(job, LIMITS, t + 700)).toEqual({ kind: 'duplicate_done', reply });
        expect(await store.storedReply(job.key, t + 700)).toEqual(reply);
        expect(await store.deadLetters()).toEqual([]);
      });
    });

    // --- leases --------------------------------------------------------------------------

    describe('leases', () => {
      const claimOne = async (store: Store, t: number, leaseMs = 1000, owner = 'worker-1'): Promise<{ job: Job; held: ClaimedJob }> => {
        const job = makeJob({ deviceId: 'd1', id: 'r-1', priority: 'normal', arrivalMs: t });
        await admitAll(store, [job]);
        const { jobs } = await store.claim(claimOpts({ leaseMs, owner }), t);
        expect(ids(jobs)).toEqual(['r-1']);
        return { job, held: jobs[0] as ClaimedJob };
      };

      it('extends a lease its owner renews, so it is not reaped at the old expiry', async () => {
        const store = await open();
        const t = baseTime();
        const { held } = await claimOne(store, t);
        expect(await store.renew('worker-1', [held.key], 1000, t + 500)).toEqual([true]);
        expect(await store.reap(3, t + 1001)).toEqual([]);
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
        expect((await store.claim(claimOpts(), t + 1002)).jobs).toEqual([]);
        expect(await store.renew('worker-1', [held.key], 1000, t + 1400)).toEqual([true]);
        expect(await store.reap(3, t + 2401)).toEqual([]);
        expect(ids((await store.claim(claimOpts(), t + 2402)).jobs)).toEqual(['r-1']);
      });

      it('refuses renewal by another owner, of an unknown key, or of an expired lease', async () => {
        const store = await open();
        const t = baseTime();
        const { held } = await claimOne(store, t);
        expect(await store.renew('worker-2', [held.key], 1000, t + 100)).toEqual([false]);
        expect(await store.renew('worker-1', ['d9/unknown'], 1000, t + 100)).toEqual([false]);
        expect(await store.renew('worker-1', ['d9/unknown', held.key], 1000, t + 100)).toEqual([false, true]);
        expect(await store.renew('worker-1', [], 1000, t + 100)).toEqual([]);
        // Lease now runs to t+1100; a renewal after that comes too late.
        expect(await store.renew('worker-1', [held.key], 1000, t + 1101)).toEqual([false]);
      });

      it('requeues a job whose lease expired with attempts + 1', async () => {
        const store = await open();
        const t = baseTime();
        const { job, held } = await claimOne(store, t);
        expect(held.attempts).toBe(0);
        expect(await store.reap(3, t + 1000 + 1)).toEqual([]);
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 1, low: 0 });
        expect(await store.renew('worker-1', [held.key], 1000, t + 1002)).toEqual([false]);
        expect(await store.admit(job, LIMITS, t + 1003)).toEqual({ kind: 'duplicate_pending' });
        const { jobs } = await store.claim(claimOpts({ owner: 'worker-2' }), t + 1004);
        expect(ids(jobs)).toEqual(['r-1']);
        expect(jobs[0]?.attempts).toBe(1);
        expect(jobs[0]?.owner).toBe('worker-2');
        expect(await store.renew('worker-2', [held.key], 1000, t + 1005)).toEqual([true]);
      });

      it('returns a job as exhausted instead of requeueing it once its attempts reach maxAttempts', async () => {
        const store = await open();
        const t = baseTime();
        const { job } = await claimOne(store, t);
        expect(await store.reap(2, t + 1001)).toEqual([]);
        const { jobs } = await store.claim(claimOpts({ leaseMs: 1000 }), t + 1002);
        expect(jobs[0]?.attempts).toBe(1);
        const exhausted = await store.reap(2, t + 2003);
        expect(ids(exhausted)).toEqual(['r-1']);
        sameJob(exhausted[0] as Job, { ...job, attempts: 2 });
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
        expect(await store.claim(claimOpts(), t + 2004)).toEqual({ jobs: [], expired: [], retryAtMs: undefined });
        expect(await store.reap(2, t + 9999)).toEqual([]);

        const reply = errorReply(job, 'upstream_error');
        await store.complete(exhausted[0] as Job, reply, { ttlS: 3600, deadLetter: true }, t + 2005);
        expect(await store.admit(job, LIMITS, t + 2006)).toEqual({ kind: 'duplicate_done', reply });
      });

      it('does not reap a lease before it expires', async () => {
        const store = await open();
        const t = baseTime();
        await claimOne(store, t);
        expect(await store.reap(1, t + 999)).toEqual([]);
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
        expect((await store.claim(claimOpts(), t + 999)).jobs).toEqual([]);
      });
    });

    // --- recorded replies ------------------------------------------------------------------

    describe('recorded replies (record before publishing)', () => {
      /** One job admitted and claimed by `owner` with a 1 s lease. */
      const claimed = async (store: Store, t: number, o: Partial<MakeJobOptions> = {}, owner = 'worker-1'): Promise<{ job: Job; held: ClaimedJob }> => {
        const job = makeJob({ deviceId: 'd1', id: 'r-1', priority: 'normal', arrivalMs: t, ...o });
        await admitAll(store, [job]);
        const { jobs } = await store.claim(claimOpts({ leaseMs: 1000, owner }), t);
        expect(ids(jobs)).toEqual([job.id]);
        expect(jobs[0]?.recordedReply).toBeUndefined();
        return { job, held: jobs[0] as ClaimedJob };
      };

      it('hands the recorded reply to the claim after the lease expired, keeps the job pending, and forgets it on completion', async () => {
        const store = await open();
        const t = baseTime();
        const { job, held } = await claimed(store, t);
        const reply = makeReply(job, 'the first answer');
        expect(await store.recordReply(held, reply, 'worker-1')).toEqual({ kind: 'recorded' });
        // Lease, lock and queue as they were; the idempotency record still pending.
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
        expect(await store.renew('worker-1', [held.key], 1000, t + 500)).toEqual([true]);
        expect(await store.storedReply(held.key, t + 500)).toBeUndefined();
        expect(await store.admit(job, LIMITS, t + 501)).toEqual({ kind: 'duplicate_pending' });

        // The holder dies: its lease runs out, the reap requeues the job, another claims it.
        expect(await store.reap(3, t + 1501)).toEqual([]);
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 1, low: 0 });
        expect(await store.admit(job, LIMITS, t + 1502)).toEqual({ kind: 'duplicate_pending' });
        const { jobs } = await store.claim(claimOpts({ owner: 'worker-2' }), t + 1503);
        expect(ids(jobs)).toEqual(['r-1']);
        expect(jobs[0]?.recordedReply).toEqual(reply);
        expect(jobs[0]).toMatchObject({ owner: 'worker-2', attempts: 1 });

        await store.complete(jobs[0] as ClaimedJob, reply, { ttlS: 1, deadLetter: false }, t + 1504);
        expect(await store.storedReply(held.key, t + 1505)).toEqual(reply);
        expect(await store.admit(job, LIMITS, t + 1506)).toEqual({ kind: 'duplicate_done', reply });
        // Admitted again once the idempotency window passed: a new request, no recorded reply.
        expect(await store.admit(job, LIMITS, t + 2505)).toEqual({ kind: 'queued' });
        const again = await store.claim(claimOpts({ owner: 'worker-3' }), t + 2506);
        expect(ids(again.jobs)).toEqual(['r-1']);
        expect(again.jobs[0]?.recordedReply).toBeUndefined();
      });

      it('records for a lease that ran out but was not reaped yet (nobody else can hold it)', async () => {
        const store = await open();
        const t = baseTime();
        const { job, held } = await claimed(store, t);
        const reply = makeReply(job);
        expect(await store.recordReply(held, reply, 'worker-1')).toEqual({ kind: 'recorded' });
        expect(await store.reap(3, t + 1001)).toEqual([]);
        expect((await store.claim(claimOpts({ owner: 'worker-2' }), t + 1002)).jobs[0]?.recordedReply).toEqual(reply);
      });

      it('refuses to record for another owner and once the lease was lost, and never replaces a recorded reply', async () => {
        const store = await open();
        const t = baseTime();
        const { job, held } = await claimed(store, t);
        expect(await store.recordReply(held, makeReply(job, 'not mine'), 'worker-2')).toEqual({ kind: 'lost' });
        expect(await store.reap(3, t + 1001)).toEqual([]);
        expect(await store.recordReply(held, makeReply(job, 'too late'), 'worker-1')).toEqual({ kind: 'lost' }); // reaped: queued
        const { jobs } = await store.claim(claimOpts({ owner: 'worker-2', leaseMs: 1000 }), t + 1002);
        expect(jobs[0]?.recordedReply).toBeUndefined(); // the refused records left nothing
        expect(await store.recordReply(held, makeReply(job, 'too late'), 'worker-1')).toEqual({ kind: 'lost' }); // another holds it
        const second = makeReply(job, 'the one answer');
        expect(await store.recordReply(jobs[0] as ClaimedJob, second, 'worker-2')).toEqual({ kind: 'recorded' });
        // A stale run under the same owner (its lease ran out, the same instance claimed it again).
        expect(await store.recordReply(jobs[0] as ClaimedJob, makeReply(job, 'another'), 'worker-2')).toEqual({ kind: 'kept', reply: second });
        await store.complete(jobs[0] as ClaimedJob, second, DONE, t + 1003);
        expect(await store.recordReply(jobs[0] as ClaimedJob, makeReply(job, 'after'), 'worker-2')).toEqual({ kind: 'lost' }); // completed
        expect(await store.storedReply(job.key, t + 1004)).toEqual(second);
      });

      it('does not return a recorded job as exhausted: the reap requeues it past maxAttempts, and dead-letters nothing', async () => {
        const store = await open();
        const t = baseTime();
        const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t });
        const b = makeJob({ deviceId: 'd1', id: 'b', priority: 'normal', arrivalMs: t + 1 });
        await admitAll(store, [a, b]);
        const { jobs } = await store.claim(claimOpts({ leaseMs: 1000 }), t + 2);
        expect(ids(jobs)).toEqual(['a', 'b']);
        const reply = makeReply(a);
        expect(await store.recordReply(jobs[0] as ClaimedJob, reply, 'worker-1')).toEqual({ kind: 'recorded' });

        const exhausted = await store.reap(1, t + 1003);
        expect(ids(exhausted)).toEqual(['b']); // b has no recorded reply: returned for a final one
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 1, low: 0 });
        expect(await store.deadLetters()).toEqual([]);
        const again = await store.claim(claimOpts({ owner: 'worker-2', leaseMs: 1000 }), t + 1004);
        expect(ids(again.jobs)).toEqual(['a']);
        expect(again.jobs[0]?.recordedReply).toEqual(reply);
        // Lost again: still requeued, never exhausted.
        expect(await store.reap(1, t + 2005)).toEqual([]);
        expect((await store.claim(claimOpts({ owner: 'worker-3' }), t + 2006)).jobs[0]?.recordedReply).toEqual(reply);
        expect(await store.deadLetters()).toEqual([]);
      });

      it('answers a duplicate admission with duplicate_pending while the reply is recorded, with or without a claim along', async () => {
        const store = await open();
        const t = baseTime();
        const { job, held } = await claimed(store, t);
        const reply = makeReply(job);
        await store.recordReply(held, reply, 'worker-1');
        const repeat = makeJob({ deviceId: 'd1', id: 'r-1', priority: 'high', arrivalMs: t + 1, content: 'other payload' });
        expect(await store.admit(repeat, LIMITS, t + 1)).toEqual({ kind: 'duplicate_pending' });
        expect(await store.admit(repeat, LIMITS, t + 2, claimOpts({ owner: 'worker-2' }))).toEqual({ kind: 'duplicate_pending' });
        expect(await store.reap(3, t + 1001)).toEqual([]);
        expect(await store.admit(repeat, LIMITS, t + 1002, claimOpts({ owner: 'worker-2' }))).toEqual({ kind: 'duplicate_pending' });
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 1, low: 0 });
      });

      it("hands the recorded reply back with a claim along another job's admission", async () => {
        const store = await open();
        const t = baseTime();
        const { job, held } = await claimed(store, t);
        const reply = makeReply(job);
        await store.recordReply(held, reply, 'worker-1');
        expect(await store.reap(3, t + 1001)).toEqual([]);
        const other = makeJob({ deviceId: 'd2', id: 'o-1', priority: 'low', arrivalMs: t + 1002 });
        const result = await store.admit(other, LIMITS, t + 1002, claimOpts({ owner: 'worker-2', max: 4 }));
        if (result.kind !== 'queued' || !result.along) throw new Error(`expected a claim along, got ${result.kind}`);
        const { jobs } = result.along.claim;
        expect(ids(jobs)).toEqual(['r-1', 'o-1']);
        expect(jobs[0]?.recordedReply).toEqual(reply);
        expect(jobs[1]?.recordedReply).toBeUndefined();
      });

      it('keeps the recorded reply through a release, and hands it back with a job that expired in the queue', async () => {
        const store = await open();
        const t = baseTime();
        const { job, held } = await claimed(store, t, { deadlineMs: t + 5000 });
        const reply = makeReply(job);
        await store.recordReply(held, reply, 'worker-1');
        await store.release([held], t + 10);
        const { jobs } = await store.claim(claimOpts({ owner: 'worker-2', leaseMs: 1000 }), t + 11);
        expect(jobs[0]?.recordedReply).toEqual(reply);
        expect(await store.reap(3, t + 1012)).toEqual([]);
        // Its deadline passed while it waited again: expired, with its reply (not to be answered `expired`).
        const late = await store.claim(claimOpts({ owner: 'worker-3' }), t + 5000);
        expect(late.jobs).toEqual([]);
        expect(ids(late.expired)).toEqual(['r-1']);
        expect(late.expired[0]?.recordedReply).toEqual(reply);
        await store.complete(late.expired[0] as Job, reply, DONE, t + 5001);
        expect(await store.admit(job, LIMITS, t + 5002)).toEqual({ kind: 'duplicate_done', reply });
      });

      it('keeps no recorded reply on a dead letter: a replay asks again', async () => {
        const store = await open();
        const t = baseTime();
        const { job, held } = await claimed(store, t);
        const reply = errorReply(job, 'upstream_error');
        await store.recordReply(held, reply, 'worker-1');
        expect(await store.reap(3, t + 1001)).toEqual([]);
        const taken = (await store.claim(claimOpts({ owner: 'worker-2' }), t + 1002)).jobs[0] as ClaimedJob;
        expect(taken.recordedReply).toEqual(reply);
        await store.complete(taken, reply, { ttlS: 3600, deadLetter: true }, t + 1003);
        const [letter] = await store.deadLetters();
        expect(letter?.reply).toEqual(reply);
        expect(letter?.job).not.toHaveProperty('recordedReply');
        expect(await store.replayDeadLetters('all', DEFAULT_PRIORITY_OFFSETS_MS, t + 2000)).toBe(1);
        const replayed = (await store.claim(claimOpts({ owner: 'worker-3' }), t + 2000)).jobs;
        expect(ids(replayed)).toEqual(['r-1']);
        expect(replayed[0]?.recordedReply).toBeUndefined();
      });
    });

    // --- complete, dead letters, release ------------------------------------------------

    describe('complete, dead letters and release', () => {
      it('lists a job completed with deadLetter: true, with its reply, and not one completed with false', async () => {
        const store = await open();
        const t = baseTime();
        const bad = makeJob({ deviceId: 'd1', id: 'bad', priority: 'high', arrivalMs: t });
        const good = makeJob({ deviceId: 'd2', id: 'good', priority: 'high', arrivalMs: t + 1 });
        await admitAll(store, [bad, good]);
        const { jobs } = await store.claim(claimOpts(), t + 2);
        expect(ids(jobs)).toEqual(['bad', 'good']);
        const badReply = errorReply(bad, 'upstream_error');
        await store.complete(jobs[0] as ClaimedJob, badReply, { ttlS: 3600, deadLetter: true }, t + 3);
        await store.complete(jobs[1] as ClaimedJob, makeReply(good), { ttlS: 3600, deadLetter: false }, t + 4);

        const dlq = await store.deadLetters();
        expect(dlq).toHaveLength(1);
        expect(dlq[0]?.job.key).toBe(bad.key);
        expect(dlq[0]?.job.id).toBe('bad');
        expect(dlq[0]?.reply).toEqual(badReply);
        expect(dlq[0]?.atMs).toBe(t + 3);
        expect(await store.admit(bad, LIMITS, t + 5)).toEqual({ kind: 'duplicate_done', reply: badReply });
      });

      it('replays chosen dead letters as new arrivals with fresh attempts, then all, and purges', async () => {
        const store = await open();
        const t = baseTime();
        const jobs = ['x', 'y', 'z'].map((id, i) =>
          makeJob({ deviceId: 'd1', id, priority: 'low', arrivalMs: t + i, lock: id === 'x' ? 'arm' : undefined, deadlineMs: t + 500 }),
        );
        await admitAll(store, jobs);
        for (const job of (await store.claim(claimOpts(), t + 10)).jobs) {
          await store.complete(job, errorReply(job, 'upstream_error'), { ttlS: 3600, deadLetter: true }, t + 20);
        }
        expect(ids((await store.deadLetters()).map((d) => d.job))).toEqual(['x', 'y', 'z']);

        const later = t + 10_000; // past the old ttl: a replay carries none
        expect(await store.replayDeadLetters([jobs[0]?.key as string, 'd1/unknown'], DEFAULT_PRIORITY_OFFSETS_MS, later)).toBe(1);
        expect(ids((await store.deadLetters()).map((d) => d.job))).toEqual(['y', 'z']);
        expect(await store.admit(jobs[0] as Job, LIMITS, later)).toEqual({ kind: 'duplicate_pending' });
        const { jobs: again, expired } = await store.claim(claimOpts(), later);
        expect(expired).toEqual([]);
        expect(ids(again)).toEqual(['x']);
        expect(again[0]).toMatchObject({ attempts: 0, arrivalMs: later, score: later + 15_000, fence: 2 });
        expect(again[0]?.deadlineMs).toBeUndefined();

        expect(await store.replayDeadLetters('all', DEFAULT_PRIORITY_OFFSETS_MS, later + 1)).toBe(2);
        expect(await store.deadLetters()).toEqual([]);
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 2 });

        const rest = (await store.claim(claimOpts(), later + 2)).jobs;
        for (const job of rest) await store.complete(job, errorReply(job, 'upstream_error'), { ttlS: 3600, deadLetter: true }, later + 3);
        expect(await store.purgeDeadLetters()).toBe(2);
        expect(await store.deadLetters()).toEqual([]);
        expect(await store.purgeDeadLetters()).toBe(0);
      });

      it('releases held jobs back to the queue with attempts unchanged and their locks freed', async () => {
        const store = await open();
        const t = baseTime();
        const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t, lock: 'x' });
        const b = makeJob({ deviceId: 'd2', id: 'b', priority: 'normal', arrivalMs: t + 1, lock: 'x' });
        await admitAll(store, [a, b]);
        // a goes once through a reap, so it carries an attempt.
        const first = await store.claim(claimOpts({ leaseMs: 1000, max: 1 }), t + 3);
        expect(ids(first.jobs)).toEqual(['a']);
        expect(await store.reap(3, t + 1004)).toEqual([]);
        const second = await store.claim(claimOpts({ owner: 'worker-2', max: 1 }), t + 1005);
        expect(ids(second.jobs)).toEqual(['a']);
        expect(second.jobs[0]?.attempts).toBe(1);

        await store.release(second.jobs, t + 1006);
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 2, low: 0 }); // a and b
        expect(await store.renew('worker-2', [a.key], 1000, t + 1007)).toEqual([false]);
        const third = await store.claim(claimOpts({ owner: 'worker-3', max: 1 }), t + 1008);
        expect(ids(third.jobs)).toEqual(['a']);
        expect(third.jobs[0]?.attempts).toBe(1);
        expect(third.jobs[0]?.fence).toBeGreaterThan(second.jobs[0]?.fence as number);
        expect(await store.admit(a, LIMITS, t + 1009)).toEqual({ kind: 'duplicate_pending' });

        await store.complete(third.jobs[0] as ClaimedJob, makeReply(a), DONE, t + 1010);
        expect(ids((await store.claim(claimOpts(), t + 1011)).jobs)).toEqual(['b']);
      });

      it('frees the lock of a released job for the job parked behind it', async () => {
        const store = await open();
        const t = baseTime();
        const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t + 5, lock: 'x' });
        const b = makeJob({ deviceId: 'd2', id: 'b', priority: 'critical', arrivalMs: t + 6, lock: 'x' });
        await admitAll(store, [a]);
        const [ha] = (await store.claim(claimOpts(), t + 7)).jobs;
        await admitAll(store, [b]);
        expect((await store.claim(claimOpts(), t + 8)).jobs).toEqual([]);
        await store.release([ha as ClaimedJob], t + 9);
        // b (critical, score t+6) now comes before a (normal, score t+5005).
        const { jobs } = await store.claim(claimOpts(), t + 10);
        expect(ids(jobs)).toEqual(['b']);
        expect(jobs[0]?.fence).toBeGreaterThan(ha?.fence as number);
      });
    });

    // --- drain, depth, durable ----------------------------------------------------------

    describe('drain, queue depth and durability', () => {
      it('counts queue depth per priority, queued and parked, not claimed', async () => {
        const store = await open();
        const t = baseTime();
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
        const spec: [Priority, number][] = [
          ['critical', 1],
          ['high', 2],
          ['low', 3],
        ];
        let n = 0;
        for (const [priority, count] of spec) {
          for (let i = 0; i < count; i += 1) {
            await admitAll(store, [makeJob({ deviceId: `d${n}`, id: `r${n}`, priority, arrivalMs: t + n })]);
            n += 1;
          }
        }
        expect(await store.queueDepth()).toEqual({ critical: 1, high: 2, normal: 0, low: 3 });
        const a = makeJob({ deviceId: 'dx', id: 'a', priority: 'normal', arrivalMs: t - 10_000, lock: 'x' });
        const b = makeJob({ deviceId: 'dy', id: 'b', priority: 'normal', arrivalMs: t - 9_000, lock: 'x' });
        await admitAll(store, [a, b], t + 100);
        expect(ids((await store.claim(claimOpts({ max: 1 }), t + 101)).jobs)).toEqual(['a']);
        // b (queued or parked) counts; a, claimed, does not.
        expect(await store.queueDepth()).toEqual({ critical: 1, high: 2, normal: 1, low: 3 });
      });

      it('drains every queued and parked job and leaves the queue empty', async () => {
        const store = await open();
        const t = baseTime();
        const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t, lock: 'x' });
        const b = makeJob({ deviceId: 'd2', id: 'b', priority: 'high', arrivalMs: t + 1, lock: 'x' });
        const c = makeJob({ deviceId: 'd3', id: 'c', priority: 'low', arrivalMs: t + 2 });
        const d = makeJob({ deviceId: 'd4', id: 'd', priority: 'critical', arrivalMs: t + 3 });
        await admitAll(store, [a, b]);
        expect(ids((await store.claim(claimOpts({ max: 1 }), t + 2)).jobs)).toEqual(['b']);
        expect((await store.claim(claimOpts({ max: 5 }), t + 2)).jobs).toEqual([]); // a parked behind b
        await admitAll(store, [c, d]);

        const drained = await store.drain();
        expect(ids(drained).sort()).toEqual(['a', 'c', 'd']);
        for (const job of drained) sameJob(job, ({ a, c, d } as Record<string, Job>)[job.id] as Job);
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
        expect(await store.drain()).toEqual([]);
        expect(await store.claim(claimOpts(), t + 4)).toEqual({ jobs: [], expired: [], retryAtMs: undefined });
      });

      it('reports durable as a boolean', async () => {
        const store = await open();
        expect(typeof store.durable).toBe('boolean');
      });
    });

    // --- cache, coalescing, usage ------------------------------------------------------------

    describe('cache, coalescing and usage', () => {
      const answer = { model: 'gpt-4o-mini', content: 'No scratch found.', finish_reason: 'stop', usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 } };
      const leadOne = async (store: Store, cacheKey: string, key: string, leaseMs: number, now: number): Promise<Lead | undefined> =>
        (await store.lead([{ cacheKey, jobKey: key }], leaseMs, now))[0];

      it('admit answers `cached` for a fresh cached answer, after the idempotency and quota checks, recording nothing', async () => {
        const store = await open();
        const t = baseTime();
        const limits = { deviceRpm: 2, queueMax: 0 }; // a full queue does not stop a cache hit
        await store.cacheSet('hc', answer, 1000, t);
        const job = { ...makeJob({ deviceId: 'd1', id: 'c1', priority: 'normal', arrivalMs: t }), cacheKey: 'hc' };
        expect(await store.admit(job, limits, t + 1)).toEqual({ kind: 'cached', answer });
        expect(await store.admit(job, limits, t + 2)).toEqual({ kind: 'cached', answer }); // nothing was recorded or counted
        expect(await store.admitAnswered(job, makeReply(job), limits, 3600, t + 3)).toEqual({ kind: 'answered' });
        expect(await store.admit(job, limits, t + 4)).toEqual({ kind: 'duplicate_done', reply: makeReply(job) });
        const second = { ...makeJob({ deviceId: 'd1', id: 'c2', priority: 'normal', arrivalMs: t }), cacheKey: 'hc' };
        expect(await store.admitAnswered(second, makeReply(second), limits, 3600, t + 5)).toEqual({ kind: 'answered' });
        const third = { ...makeJob({ deviceId: 'd1', id: 'c3', priority: 'normal', arrivalMs: t }), cacheKey: 'hc' };
        expect(await store.admit(third, limits, t + 6)).toMatchObject({ kind: 'rate_limited' });
        // A stale entry, or none, is a miss: the job is queued as usual.
        const other = { ...makeJob({ deviceId: 'd2', id: 'c4', priority: 'normal', arrivalMs: t }), cacheKey: 'hc' };
        expect(await store.admit(other, { deviceRpm: 2, queueMax: 10 }, t + 1000)).toEqual({ kind: 'queued' });
        const uncached = { ...makeJob({ deviceId: 'd2', id: 'c5', priority: 'normal', arrivalMs: t }), cacheKey: 'nothing-here' };
        expect(await store.admit(uncached, { deviceRpm: 2, queueMax: 10 }, t + 1)).toEqual({ kind: 'queued' });
      });

      it('takes the coalescing steps of many jobs in one call, in order', async () => {
        const store = await open();
        const t = baseTime();
        await store.cacheSet('m-done', answer, 1000, t);
        expect(await leadOne(store, 'm-busy', 'd0/held', 5000, t)).toEqual({ leader: 'd0/held' });
        const leads = await store.lead(
          [
            { cacheKey: 'm-new', jobKey: 'd1/a' },
            { cacheKey: 'm-new', jobKey: 'd2/b' }, // identical to the first: it follows
            { cacheKey: 'm-done', jobKey: 'd3/c' },
            { cacheKey: 'm-busy', jobKey: 'd4/d' },
          ],
          5000,
          t + 1,
        );
        expect(leads).toEqual([{ leader: 'd1/a' }, { leader: 'd1/a' }, { answer }, { leader: 'd0/held' }]);
        expect(await store.lead([], 5000, t + 2)).toEqual([]);
      });

      it('keeps a cached answer for its ttl, then forgets it', async () => {
        const store = await open();
        const t = baseTime();
        expect(await store.cacheGet('h1', t)).toBeUndefined();
        await store.cacheSet('h1', answer, 1000, t);
        expect(await store.cacheGet('h1', t + 999)).toEqual(answer);
        expect(await store.cacheGet('h2', t + 1)).toBeUndefined();
        expect(await store.cacheGet('h1', t + 1000)).toBeUndefined();
      });

      it('records a cache-answered request for idempotency and quota, without queueing it', async () => {
        const store = await open();
        const t = baseTime();
        const job = makeJob({ deviceId: 'd1', id: 'c1', priority: 'high', arrivalMs: t });
        const reply = makeReply(job, 'from the cache');
        const limits = { deviceRpm: 2, queueMax: 10 };
        expect(await store.admitAnswered(job, reply, limits, 3600, t)).toEqual({ kind: 'answered' });
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
        expect(await store.admit(job, limits, t + 1)).toEqual({ kind: 'duplicate_done', reply });
        expect(await store.admitAnswered(job, reply, limits, 3600, t + 2)).toEqual({ kind: 'duplicate_done', reply });
        const other = makeJob({ deviceId: 'd1', id: 'c2', priority: 'high', arrivalMs: t });
        expect(await store.admit(other, limits, t + 3)).toEqual({ kind: 'queued' });
        const third = makeJob({ deviceId: 'd1', id: 'c3', priority: 'high', arrivalMs: t });
        expect(await store.admitAnswered(third, makeReply(third), limits, 3600, t + 4)).toMatchObject({ kind: 'rate_limited' });
        const pending = makeJob({ deviceId: 'd1', id: 'c2', priority: 'high', arrivalMs: t });
        expect(await store.admitAnswered(pending, makeReply(pending), limits, 3600, t + 5)).toEqual({ kind: 'duplicate_pending' });
      });

      it('lets one job lead a cache key until it unleads or its lease runs out', async () => {
        const store = await open();
        const t = baseTime();
        expect(await leadOne(store, 'h', 'd1/a', 5000, t)).toEqual({ leader: 'd1/a' });
        expect(await leadOne(store, 'h', 'd2/b', 5000, t + 1)).toEqual({ leader: 'd1/a' });
        expect(await leadOne(store, 'h', 'd1/a', 5000, t + 2)).toEqual({ leader: 'd1/a' }); // the leader again: renewed
        expect(await leadOne(store, 'other', 'd2/b', 5000, t + 2)).toEqual({ leader: 'd2/b' });
        await store.unlead('h', 'd2/b'); // not the leader: no effect
        expect(await leadOne(store, 'h', 'd2/b', 5000, t + 3)).toEqual({ leader: 'd1/a' });
        await store.unlead('h', 'd1/a');
        expect(await leadOne(store, 'h', 'd2/b', 5000, t + 4)).toEqual({ leader: 'd2/b' });
        expect(await leadOne(store, 'h', 'd3/c', 5000, t + 4 + 5000)).toEqual({ leader: 'd3/c' }); // d2/b's lease ran out
        // Once the answer is cached, whoever asks gets it instead of a leader.
        await store.cacheSet('h', answer, 1000, t + 9000);
        expect(await leadOne(store, 'h', 'd4/d', 5000, t + 9001)).toEqual({ answer });
        expect(await leadOne(store, 'h', 'd4/d', 5000, t + 10_005)).toEqual({ leader: 'd4/d' }); // answer and d3/c's lease gone
      });

      it('records the cache entry, ends the flight and adds usage with the completion, in one step', async () => {
        const store = await open();
        const t = Math.floor(Date.now() / 3_600_000) * 3_600_000 + 1000;
        const limits = { deviceRpm: 10, queueMax: 10 };
        const job = makeJob({ deviceId: 'd1', id: 'lead', priority: 'normal', arrivalMs: t });
        expect(await store.admit(job, limits, t)).toEqual({ kind: 'queued' });
        const { jobs } = await store.claim(claimOpts({ owner: 'me' }), t + 1);
        const held = jobs[0] as ClaimedJob;
        expect(await leadOne(store, 'hk', held.key, 5000, t + 2)).toEqual({ leader: held.key });
        expect(await leadOne(store, 'hk', 'd2/follower', 5000, t + 3)).toEqual({ leader: held.key });
        const usage = { deviceId: 'd1', model: 'big', priority: 'normal' as Priority, promptTokens: 7, completionTokens: 3, costUsd: 0.25 };

        await store.complete(held, makeReply(held), { ...DONE, cache: { key: 'hk', answer, ttlMs: 1000 }, unlead: 'hk', usage }, t + 4);

        expect(await store.storedReply(held.key, t + 5)).toEqual(makeReply(held));
        expect(await leadOne(store, 'hk', 'd2/follower', 5000, t + 5)).toEqual({ answer });
        expect(await store.cacheGet('hk', t + 1003)).toEqual(answer);
        expect(await store.cacheGet('hk', t + 1004)).toBeUndefined();
        // The flight ended too: with the answer gone, the follower leads.
        expect(await leadOne(store, 'hk', 'd2/follower', 5000, t + 1005)).toEqual({ leader: 'd2/follower' });
        expect((await store.usage(t, t + 10)).byDevice.d1).toEqual({ requests: 1, promptTokens: 7, completionTokens: 3, costUsd: 0.25 });
      });

      it('ends only its own flight when completing, and books nothing it was not asked to', async () => {
        const store = await open();
        const t = baseTime();
        const limits = { deviceRpm: 10, queueMax: 10 };
        const job = makeJob({ deviceId: 'd1', id: 'late', priority: 'normal', arrivalMs: t });
        await store.admit(job, limits, t);
        const held = (await store.claim(claimOpts({ owner: 'me' }), t + 1)).jobs[0] as ClaimedJob;
        expect(await leadOne(store, 'hk2', 'd9/other', 5000, t + 2)).toEqual({ leader: 'd9/other' });

        await store.complete(held, makeReply(held), { ...DONE, unlead: 'hk2' }, t + 3);

        expect(await leadOne(store, 'hk2', 'd3/x', 5000, t + 4)).toEqual({ leader: 'd9/other' });
        expect(await store.cacheGet('hk2', t + 4)).toBeUndefined();
        expect((await store.usage(t - 3_600_000, t + 10)).total.requests).toBe(0);
      });

      it('adds usage up by device, model and priority, per hour', async () => {
        const store = await open();
        const t = Math.floor(Date.now() / 3_600_000) * 3_600_000;
        const rec = (deviceId: string, model: string, priority: Priority, p: number, c: number, usd: number) => ({
          deviceId, model, priority, promptTokens: p, completionTokens: c, costUsd: usd,
        });
        await store.recordUsage(rec('cam-1', 'big', 'critical', 100, 20, 0.5), t + 10);
        await store.recordUsage(rec('cam-1', 'small', 'low', 10, 2, 0.25), t + 20);
        await store.recordUsage(rec('cam-2', 'small', 'low', 1, 1, 0), t + 3_600_000 + 5);
        const both = await store.usage(t, t + 3_600_000 + 10);
        expect(both.total).toEqual({ requests: 3, promptTokens: 111, completionTokens: 23, costUsd: 0.75 });
        expect(both.byDevice['cam-1']).toEqual({ requests: 2, promptTokens: 110, completionTokens: 22, costUsd: 0.75 });
        expect(both.byModel.small).toEqual({ requests: 2, promptTokens: 11, completionTokens: 3, costUsd: 0.25 });
        expect(both.byPriority.critical).toEqual({ requests: 1, promptTokens: 100, completionTokens: 20, costUsd: 0.5 });
        const first = await store.usage(t, t + 3_599_999);
        expect(first.total.requests).toBe(2);
        expect(first.byDevice['cam-2']).toBeUndefined();
      });
    });

    // --- concurrency ---------------------------------------------------------------------

    describe('concurrency', () => {
      it('hands each of 2000 jobs to exactly one of 8 concurrent claimers', async () => {
        const store = await open();
        const t = baseTime();
        const total = 2000;
        const jobs = Array.from({ length: total }, (_, i) =>
          makeJob({ deviceId: `dev-${i % 50}`, id: `j-${i}`, priority: PRIORITIES[i % 4] as Priority, arrivalMs: t + i }),
        );
        const limits = { deviceRpm: total, queueMax: total };
        await Promise.all(jobs.map((job) => store.admit(job, limits, t + total)));
        const claimedBy = new Map<string, string[]>();
        const claimer = async (owner: string): Promise<void> => {
          for (;;) {
            const { jobs: got } = await store.claim(claimOpts({ owner, max: 7 }), t + total);
            if (got.length === 0) return;
            for (const job of got) claimedBy.set(job.key, [...(claimedBy.get(job.key) ?? []), owner]);
          }
        };
        await Promise.all(Array.from({ length: 8 }, (_, i) => claimer(`worker-${i}`)));
        expect(claimedBy.size).toBe(total);
        expect([...claimedBy.values()].filter((owners) => owners.length !== 1)).toEqual([]);
        expect(new Set([...claimedBy.values()].map((o) => o[0])).size).toBeGreaterThan(1);
        expect(await store.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
      });
    });
  });
}
