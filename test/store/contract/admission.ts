// Store contract, admission: idempotency by (deviceId, id), the device quota, queueMax, and
// an admission that claims along in the same step.
import { describe, expect, it } from 'vitest';
import type { AdmitLimits } from '../../../bridge/store/port.js';
import type { ClaimedJob, Job } from '../../../bridge/model/job.js';
import { admitAll, baseTime, claimOpts, type ContractContext, DONE, ids, LEASE, leadOneOf, leaves, LIMITS, makeJob, makeReply, sameJob } from './fixtures.js';

export function admissionContract({ open }: ContractContext): void {
  describe('admission and idempotency', () => {
    it('admits a new job as queued', async () => {
      const store = await open();
      const t = baseTime();
      const job = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'normal', arrivalMs: t });
      expect(await store.queue.admit(job, LIMITS, t)).toEqual({ kind: 'queued' });
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 1, low: 0 });
      expect(await store.answers.storedReply(job.key, t)).toBeUndefined();
    });

    it('answers a repeat of a queued or claimed (deviceId, id) with duplicate_pending, whatever its payload', async () => {
      const store = await open();
      const t = baseTime();
      const job = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'normal', arrivalMs: t });
      const other = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'critical', arrivalMs: t + 5, content: 'something else' });
      await admitAll(store, [job]);
      expect(await store.queue.admit(job, LIMITS, t + 1)).toEqual({ kind: 'duplicate_pending' });
      expect(await store.queue.admit(other, LIMITS, t + 5)).toEqual({ kind: 'duplicate_pending' });
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 1, low: 0 });

      const { jobs } = await store.queue.claim(claimOpts(), t + 10);
      expect(ids(jobs)).toEqual(['r-1']);
      expect(await store.queue.admit(other, LIMITS, t + 20)).toEqual({ kind: 'duplicate_pending' });
      expect((await store.queue.claim(claimOpts(), t + 30)).jobs).toEqual([]);
    });

    it('answers a repeat of a completed job with duplicate_done and exactly the stored reply', async () => {
      const store = await open();
      const t = baseTime();
      const job = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'high', arrivalMs: t });
      await admitAll(store, [job]);
      const [claimed] = (await store.queue.claim(claimOpts(), t + 1)).jobs;
      expect(claimed?.key).toBe(job.key);
      const reply = makeReply(job);
      await store.queue.complete(claimed as ClaimedJob, reply, DONE, t + 100);

      const repeat = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'low', arrivalMs: t + 200, content: 'other payload' });
      expect(await store.queue.admit(repeat, LIMITS, t + 200)).toEqual({ kind: 'duplicate_done', reply });
      expect(await store.queue.admit(job, LIMITS, t + 300)).toEqual({ kind: 'duplicate_done', reply });
      expect(await store.answers.storedReply(job.key, t + 300)).toEqual(reply);
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
    });

    it('admits the key again once the idempotency ttl has passed', async () => {
      const store = await open();
      const t = baseTime();
      const job = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'normal', arrivalMs: t });
      await admitAll(store, [job]);
      const [claimed] = (await store.queue.claim(claimOpts(), t)).jobs;
      const reply = makeReply(job);
      await store.queue.complete(claimed as ClaimedJob, reply, { ttlS: 1, deadLetter: false }, t + 10);

      expect(await store.queue.admit(job, LIMITS, t + 10 + 999)).toEqual({ kind: 'duplicate_done', reply });
      expect(await store.answers.storedReply(job.key, t + 10 + 999)).toEqual(reply);
      expect(await store.answers.storedReply(job.key, t + 10 + 1001)).toBeUndefined();
      const again = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'normal', arrivalMs: t + 10 + 1001 });
      expect(await store.queue.admit(again, LIMITS, t + 10 + 1001)).toEqual({ kind: 'queued' });
      expect(await store.queue.admit(again, LIMITS, t + 10 + 1002)).toEqual({ kind: 'duplicate_pending' });
    });

    it('keeps the same id on different devices independent', async () => {
      const store = await open();
      const t = baseTime();
      const a = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'normal', arrivalMs: t });
      const b = makeJob({ deviceId: 'cam-2', id: 'r-1', priority: 'normal', arrivalMs: t + 1 });
      await admitAll(store, [a, b]);
      const { jobs } = await store.queue.claim(claimOpts({ max: 1 }), t + 2);
      expect(jobs.map((j) => j.key)).toEqual([a.key]);
      await store.queue.complete(jobs[0] as ClaimedJob, makeReply(a), DONE, t + 3);

      expect(await store.queue.admit(a, LIMITS, t + 4)).toEqual({ kind: 'duplicate_done', reply: makeReply(a) });
      expect(await store.queue.admit(b, LIMITS, t + 4)).toEqual({ kind: 'duplicate_pending' });
      expect(await store.answers.storedReply(b.key, t + 4)).toBeUndefined();
      const c = makeJob({ deviceId: 'cam-3', id: 'r-1', priority: 'normal', arrivalMs: t + 5 });
      expect(await store.queue.admit(c, LIMITS, t + 5)).toEqual({ kind: 'queued' });
    });
  });
}

export function deviceQuotaContract({ open }: ContractContext): void {
  describe('device quota', () => {
    const quota: AdmitLimits = { deviceRpm: 3, queueMax: 1000 };

    it('admits deviceRpm jobs in 60 s, then answers rate_limited with the wait for the oldest bucket to leave', async () => {
      const store = await open();
      const t = baseTime();
      for (let i = 0; i < 3; i += 1) {
        const job = makeJob({ deviceId: 'cam-1', id: `r-${i}`, priority: 'normal', arrivalMs: t + i * 1000 });
        expect(await store.queue.admit(job, quota, job.arrivalMs)).toEqual({ kind: 'queued' });
      }
      const over = makeJob({ deviceId: 'cam-1', id: 'r-3', priority: 'normal', arrivalMs: t + 10_000 });
      expect(await store.queue.admit(over, quota, t + 10_000)).toEqual({ kind: 'rate_limited', retryAfterMs: leaves(t) - t - 10_000 });
      expect(await store.queue.admit(over, quota, leaves(t) - 1)).toEqual({ kind: 'rate_limited', retryAfterMs: 1 });
    });

    it('leaves other devices unaffected by one device being over its quota', async () => {
      const store = await open();
      const t = baseTime();
      for (let i = 0; i < 3; i += 1) {
        await store.queue.admit(makeJob({ deviceId: 'cam-1', id: `r-${i}`, priority: 'normal', arrivalMs: t }), quota, t);
      }
      const over = makeJob({ deviceId: 'cam-1', id: 'r-9', priority: 'normal', arrivalMs: t + 1 });
      expect((await store.queue.admit(over, quota, t + 1)).kind).toBe('rate_limited');
      for (let i = 0; i < 3; i += 1) {
        const job = makeJob({ deviceId: 'cam-2', id: `r-${i}`, priority: 'normal', arrivalMs: t + 2 });
        expect(await store.queue.admit(job, quota, t + 2)).toEqual({ kind: 'queued' });
      }
    });

    it('rolls the window: an admission leaves it a minute after its 2 s bucket ends, and rejected attempts use no quota', async () => {
      const store = await open();
      const t = baseTime();
      for (let i = 0; i < 3; i += 1) {
        const job = makeJob({ deviceId: 'cam-1', id: `r-${i}`, priority: 'normal', arrivalMs: t + i * 1000 });
        await store.queue.admit(job, quota, job.arrivalMs);
      }
      const next = (id: string, at: number): Job => makeJob({ deviceId: 'cam-1', id, priority: 'normal', arrivalMs: at });
      // t ends its bucket, so it leaves exactly a minute later, alone.
      const later = leaves(t);
      expect((await store.queue.admit(next('r-3', later - 1), quota, later - 1)).kind).toBe('rate_limited');
      expect(await store.queue.admit(next('r-3', later), quota, later)).toEqual({ kind: 'queued' });
      expect(await store.queue.admit(next('r-4', later + 1), quota, later + 1)).toEqual({ kind: 'rate_limited', retryAfterMs: leaves(t + 1000) - later - 1 });
      // t+1000 and t+2000 share a bucket: both leave at once.
      const both = leaves(t + 1000);
      expect(await store.queue.admit(next('r-4', both), quota, both)).toEqual({ kind: 'queued' });
      expect(await store.queue.admit(next('r-5', both + 1), quota, both + 1)).toEqual({ kind: 'queued' });
    });

    it('counts every publish: duplicates, cache hits and refusals counted on their own, nothing once over', async () => {
      const store = await open();
      const t = baseTime();
      const job = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'normal', arrivalMs: t });
      expect(await store.queue.admit(job, quota, t)).toEqual({ kind: 'queued' });
      expect(await store.queue.admit(job, quota, t + 1)).toEqual({ kind: 'duplicate_pending' });
      expect(await store.limits.chargeQuota('cam-1', 3, t + 2)).toEqual({ ok: true }); // an invalid publish
      expect(await store.limits.chargeQuota('cam-1', 3, t + 3)).toEqual({ ok: false, retryAfterMs: leaves(t) - t - 3 });
      expect(await store.queue.admit(job, quota, t + 4)).toEqual({ kind: 'rate_limited', retryAfterMs: leaves(t) - t - 4 });
      expect(await store.limits.chargeQuota('cam-2', 3, t + 5)).toEqual({ ok: true });
      // Refused publishes were not counted: the three counted leave together.
      expect(await store.queue.admit(job, quota, leaves(t))).toEqual({ kind: 'duplicate_pending' });
    });

    it('creates no idempotency record for a rate_limited or queue_full admission; the quota counts the queue_full one only', async () => {
      const store = await open();
      const t = baseTime();
      const limits: AdmitLimits = { deviceRpm: 1, queueMax: 1 };
      const a1 = makeJob({ deviceId: 'cam-1', id: 'a-1', priority: 'normal', arrivalMs: t });
      const a2 = makeJob({ deviceId: 'cam-1', id: 'a-2', priority: 'normal', arrivalMs: t + 1 });
      const b1 = makeJob({ deviceId: 'cam-2', id: 'b-1', priority: 'normal', arrivalMs: t + 2 });
      expect(await store.queue.admit(a1, limits, t)).toEqual({ kind: 'queued' });
      expect((await store.queue.admit(a2, limits, t + 1)).kind).toBe('rate_limited');
      expect(await store.queue.admit(b1, limits, t + 2)).toEqual({ kind: 'queue_full' });
      expect(await store.answers.storedReply(a2.key, t + 3)).toBeUndefined();
      expect(await store.answers.storedReply(b1.key, t + 3)).toBeUndefined();

      // Room in the queue again, but cam-2's queue_full attempt used its quota.
      expect(ids((await store.queue.claim(claimOpts(), t + 3)).jobs)).toEqual(['a-1']);
      expect((await store.queue.admit(b1, limits, t + 4)).kind).toBe('rate_limited');
      expect(await store.queue.admit(b1, limits, leaves(t + 2))).toEqual({ kind: 'queued' });
      expect(ids((await store.queue.claim(claimOpts(), leaves(t + 2))).jobs)).toEqual(['b-1']);
      // cam-1's quota frees a minute after its bucket: the rate-limited key is new, not a duplicate.
      expect(await store.queue.admit(a2, limits, leaves(t))).toEqual({ kind: 'queued' });
    });
  });
}

export function queueMaxContract({ open }: ContractContext): void {
  describe('queueMax', () => {
    it('counts queued and parked jobs, not claimed ones, and answers queue_full over it', async () => {
      const store = await open();
      const t = baseTime();
      const a = makeJob({ deviceId: 'cam-1', id: 'a', priority: 'normal', arrivalMs: t, lock: 'x' });
      const b = makeJob({ deviceId: 'cam-1', id: 'b', priority: 'normal', arrivalMs: t + 1, lock: 'x' });
      await admitAll(store, [a, b]);
      expect(ids((await store.queue.claim(claimOpts(), t + 2)).jobs)).toEqual(['a']); // b is parked behind a
      const limits: AdmitLimits = { deviceRpm: 1000, queueMax: 2 };
      const c = makeJob({ deviceId: 'cam-2', id: 'c', priority: 'normal', arrivalMs: t + 3 });
      const d = makeJob({ deviceId: 'cam-2', id: 'd', priority: 'normal', arrivalMs: t + 4 });
      expect(await store.queue.admit(c, limits, t + 3)).toEqual({ kind: 'queued' });
      expect(await store.queue.admit(d, limits, t + 4)).toEqual({ kind: 'queue_full' });
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 2, low: 0 });
    });

    it('admits again once a claim frees room', async () => {
      const store = await open();
      const t = baseTime();
      const limits: AdmitLimits = { deviceRpm: 1000, queueMax: 2 };
      const jobs = ['a', 'b', 'c'].map((id, i) => makeJob({ deviceId: 'cam-1', id, priority: 'normal', arrivalMs: t + i }));
      expect(await store.queue.admit(jobs[0] as Job, limits, t)).toEqual({ kind: 'queued' });
      expect(await store.queue.admit(jobs[1] as Job, limits, t + 1)).toEqual({ kind: 'queued' });
      expect(await store.queue.admit(jobs[2] as Job, limits, t + 2)).toEqual({ kind: 'queue_full' });
      expect(ids((await store.queue.claim(claimOpts({ max: 1 }), t + 3)).jobs)).toEqual(['a']);
      expect(await store.queue.admit(jobs[2] as Job, limits, t + 4)).toEqual({ kind: 'queued' });
      expect(await store.queue.admit(makeJob({ deviceId: 'cam-1', id: 'd', priority: 'normal', arrivalMs: t + 5 }), limits, t + 5)).toEqual({
        kind: 'queue_full',
      });
    });
  });
}

export function claimAlongContract({ open }: ContractContext): void {
  describe('admission with a claim along', () => {
    it('claims right after enqueueing: the admitted job when it is the best, leased as claim() would', async () => {
      const store = await open();
      const t = baseTime();
      const job = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t });
      const result = await store.queue.admit(job, LIMITS, t, claimOpts({ owner: 'me', max: 4 }));
      if (result.kind !== 'queued' || !result.along) throw new Error(`expected queued with a claim, got ${JSON.stringify(result)}`);
      expect(ids(result.along.claim.jobs)).toEqual(['a']);
      const held = result.along.claim.jobs[0] as ClaimedJob;
      sameJob(held, job);
      expect(held.owner).toBe('me');
      expect(result.along.lead).toBeUndefined(); // no cache key: it never shares its call
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
      expect(await store.queue.renew('me', ['d1/a'], LEASE, t + 1)).toEqual([true]);
      expect(await store.queue.claim(claimOpts(), t + 2)).toEqual({ jobs: [], expired: [], retryAtMs: undefined });
      // Without a claim, admission stays as it was.
      expect(await store.queue.admit(makeJob({ deviceId: 'd1', id: 'b', priority: 'normal', arrivalMs: t }), LIMITS, t + 3)).toEqual({ kind: 'queued' });
    });

    it('takes the best jobs, not necessarily the admitted one', async () => {
      const store = await open();
      const t = baseTime();
      const critical = makeJob({ deviceId: 'd1', id: 'c', priority: 'critical', arrivalMs: t });
      await admitAll(store, [critical], t);
      const low = { ...makeJob({ deviceId: 'd3', id: 'l', priority: 'low', arrivalMs: t + 10 }), cacheKey: 'k-low' };
      const result = await store.queue.admit(low, LIMITS, t + 10, claimOpts({ owner: 'me', max: 1 }));
      if (result.kind !== 'queued' || !result.along) throw new Error('expected queued with a claim');
      expect(ids(result.along.claim.jobs)).toEqual(['c']);
      expect(result.along.lead).toBeUndefined(); // the admitted job was not claimed
      expect(ids((await store.queue.claim(claimOpts({ max: 5 }), t + 11)).jobs)).toEqual(['l']);
    });

    it('gives the admitted job its first coalescing step when the claim took it', async () => {
      const store = await open();
      const t = baseTime();
      const first = { ...makeJob({ deviceId: 'd1', id: 'x', priority: 'normal', arrivalMs: t }), cacheKey: 'same' };
      const r1 = await store.queue.admit(first, LIMITS, t, claimOpts({ owner: 'me' }));
      expect(r1.kind === 'queued' && r1.along?.lead).toEqual({ leader: 'd1/x' });
      const second = { ...makeJob({ deviceId: 'd2', id: 'y', priority: 'normal', arrivalMs: t + 1 }), cacheKey: 'same' };
      const r2 = await store.queue.admit(second, LIMITS, t + 1, claimOpts({ owner: 'me' }));
      expect(r2.kind === 'queued' && r2.along?.lead).toEqual({ leader: 'd1/x' }); // it follows the first
      expect(await leadOneOf(store, 'same', 'd3/z', t + 2)).toEqual({ leader: 'd1/x' });
    });

    it('claims nothing past the upstream rate budget and says when to retry; refusals claim nothing', async () => {
      const store = await open();
      const t = baseTime();
      await admitAll(store, [makeJob({ deviceId: 'd1', id: 'first', priority: 'normal', arrivalMs: t })], t);
      expect(ids((await store.queue.claim(claimOpts({ rpm: 1 }), t + 1)).jobs)).toEqual(['first']);
      const job = makeJob({ deviceId: 'd2', id: 'second', priority: 'normal', arrivalMs: t + 2 });
      const result = await store.queue.admit(job, LIMITS, t + 2, claimOpts({ rpm: 1 }));
      if (result.kind !== 'queued' || !result.along) throw new Error('expected queued with a claim');
      expect(result.along.claim.jobs).toEqual([]);
      expect(result.along.claim.retryAtMs).toBe(leaves(t + 1));
      expect(await store.queue.admit(job, LIMITS, t + 3, claimOpts())).toEqual({ kind: 'duplicate_pending' });
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 1, low: 0 });
    });
  });
}
