// Store contract, recorded replies: a reply recorded before publishing survives the holder's
// crash and comes back with whoever claims the job next.
import { describe, expect, it } from 'vitest';
import { DEFAULT_PRIORITY_OFFSETS_MS } from '../../../bridge/config/config.js';
import type { ClaimedJob, Job } from '../../../bridge/model/job.js';
import {
  admitAll,
  allDeadLetters,
  admitAndClaim,
  baseTime,
  claimOpts,
  type ContractContext,
  DONE,
  errorReply,
  ids,
  LIMITS,
  makeJob,
  makeReply,
} from './fixtures.js';

export function recordedRepliesContract({ open }: ContractContext): void {
  describe('recorded replies (record before publishing)', () => {
    it('hands the recorded reply to the claim after the lease expired, keeps the job pending, and forgets it on completion', async () => {
      const store = await open();
      const t = baseTime();
      const { job, held } = await admitAndClaim(store, t);
      const reply = makeReply(job, 'the first answer');
      expect(await store.queue.recordReply(held, reply, 'worker-1')).toEqual({ kind: 'recorded' });
      // Lease, lock and queue as they were; the idempotency record still pending.
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
      expect(await store.queue.renew('worker-1', [held.key], 1000, t + 500)).toEqual([true]);
      expect(await store.answers.storedReply(held.key, t + 500)).toBeUndefined();
      // A repeat meanwhile gets the recorded reply: it may already have been published, and the
      // completion would come too late for it.
      expect(await store.queue.admit(job, LIMITS, t + 501)).toEqual({ kind: 'duplicate_done', reply });

      // The holder dies: its lease runs out, the reap requeues the job, another claims it.
      expect(await store.queue.reap(3, t + 1501)).toEqual([]);
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 1, low: 0 });
      expect(await store.queue.admit(job, LIMITS, t + 1502)).toEqual({ kind: 'duplicate_done', reply });
      const { jobs } = await store.queue.claim(claimOpts({ owner: 'worker-2' }), t + 1503);
      expect(ids(jobs)).toEqual(['r-1']);
      expect(jobs[0]?.recordedReply).toEqual(reply);
      expect(jobs[0]).toMatchObject({ owner: 'worker-2', attempts: 1 });

      await store.queue.complete(jobs[0] as ClaimedJob, reply, { ttlS: 1, deadLetter: false }, t + 1504);
      expect(await store.answers.storedReply(held.key, t + 1505)).toEqual(reply);
      expect(await store.queue.admit(job, LIMITS, t + 1506)).toEqual({ kind: 'duplicate_done', reply });
      // Admitted again once the idempotency window passed: a new request, no recorded reply.
      expect(await store.queue.admit(job, LIMITS, t + 2505)).toEqual({ kind: 'queued' });
      const again = await store.queue.claim(claimOpts({ owner: 'worker-3' }), t + 2506);
      expect(ids(again.jobs)).toEqual(['r-1']);
      expect(again.jobs[0]?.recordedReply).toBeUndefined();
    });

    it('records for a lease that ran out but was not reaped yet (nobody else can hold it)', async () => {
      const store = await open();
      const t = baseTime();
      const { job, held } = await admitAndClaim(store, t);
      const reply = makeReply(job);
      expect(await store.queue.recordReply(held, reply, 'worker-1')).toEqual({ kind: 'recorded' });
      expect(await store.queue.reap(3, t + 1001)).toEqual([]);
      expect((await store.queue.claim(claimOpts({ owner: 'worker-2' }), t + 1002)).jobs[0]?.recordedReply).toEqual(reply);
    });

    it('refuses to record for another owner and once the lease was lost, and never replaces a recorded reply', async () => {
      const store = await open();
      const t = baseTime();
      const { job, held } = await admitAndClaim(store, t);
      expect(await store.queue.recordReply(held, makeReply(job, 'not mine'), 'worker-2')).toEqual({ kind: 'lost' });
      expect(await store.queue.reap(3, t + 1001)).toEqual([]);
      expect(await store.queue.recordReply(held, makeReply(job, 'too late'), 'worker-1')).toEqual({ kind: 'lost' }); // reaped: queued
      const { jobs } = await store.queue.claim(claimOpts({ owner: 'worker-2', leaseMs: 1000 }), t + 1002);
      expect(ids(jobs)).toEqual(['r-1']);
      expect(jobs[0]?.recordedReply).toBeUndefined(); // the refused records left nothing
      expect(await store.queue.recordReply(held, makeReply(job, 'too late'), 'worker-1')).toEqual({ kind: 'lost' }); // another holds it
      const second = makeReply(job, 'the one answer');
      expect(await store.queue.recordReply(jobs[0] as ClaimedJob, second, 'worker-2')).toEqual({ kind: 'recorded' });
      // A stale run under the same owner (its lease ran out, the same instance claimed it again).
      expect(await store.queue.recordReply(jobs[0] as ClaimedJob, makeReply(job, 'another'), 'worker-2')).toEqual({ kind: 'kept', reply: second });
      await store.queue.complete(jobs[0] as ClaimedJob, second, DONE, t + 1003);
      expect(await store.queue.recordReply(jobs[0] as ClaimedJob, makeReply(job, 'after'), 'worker-2')).toEqual({ kind: 'lost' }); // completed
      expect(await store.answers.storedReply(job.key, t + 1004)).toEqual(second);
    });

    it('does not return a recorded job as exhausted: the reap requeues it past maxAttempts, and dead-letters nothing', async () => {
      const store = await open();
      const t = baseTime();
      const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t });
      const b = makeJob({ deviceId: 'd1', id: 'b', priority: 'normal', arrivalMs: t + 1 });
      await admitAll(store, [a, b]);
      const { jobs } = await store.queue.claim(claimOpts({ leaseMs: 1000 }), t + 2);
      expect(ids(jobs)).toEqual(['a', 'b']);
      const reply = makeReply(a);
      expect(await store.queue.recordReply(jobs[0] as ClaimedJob, reply, 'worker-1')).toEqual({ kind: 'recorded' });

      const exhausted = await store.queue.reap(1, t + 1003);
      expect(ids(exhausted)).toEqual(['b']); // b has no recorded reply: returned for a final one
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 1, low: 0 });
      expect(await allDeadLetters(store)).toEqual([]);
      const again = await store.queue.claim(claimOpts({ owner: 'worker-2', leaseMs: 1000 }), t + 1004);
      expect(ids(again.jobs)).toEqual(['a']);
      expect(again.jobs[0]?.recordedReply).toEqual(reply);
      // Lost again: still requeued, never exhausted.
      expect(await store.queue.reap(1, t + 2005)).toEqual([]);
      expect((await store.queue.claim(claimOpts({ owner: 'worker-3' }), t + 2006)).jobs[0]?.recordedReply).toEqual(reply);
      expect(await allDeadLetters(store)).toEqual([]);
    });

    it('answers a duplicate admission with the recorded reply (it may already be published), with or without a claim along', async () => {
      const store = await open();
      const t = baseTime();
      const { job, held } = await admitAndClaim(store, t);
      const reply = makeReply(job);
      await store.queue.recordReply(held, reply, 'worker-1');
      const repeat = makeJob({ deviceId: 'd1', id: 'r-1', priority: 'high', arrivalMs: t + 1, content: 'other payload' });
      expect(await store.queue.admit(repeat, LIMITS, t + 1)).toEqual({ kind: 'duplicate_done', reply });
      expect(await store.queue.admit(repeat, LIMITS, t + 2, claimOpts({ owner: 'worker-2' }))).toEqual({ kind: 'duplicate_done', reply });
      expect(await store.queue.reap(3, t + 1001)).toEqual([]);
      expect(await store.queue.admit(repeat, LIMITS, t + 1002, claimOpts({ owner: 'worker-2' }))).toEqual({ kind: 'duplicate_done', reply });
      // The job itself is left to whoever holds it next, who publishes the same reply.
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 1, low: 0 });
    });

    it("hands the recorded reply back with a claim along another job's admission", async () => {
      const store = await open();
      const t = baseTime();
      const { job, held } = await admitAndClaim(store, t);
      const reply = makeReply(job);
      await store.queue.recordReply(held, reply, 'worker-1');
      expect(await store.queue.reap(3, t + 1001)).toEqual([]);
      const other = makeJob({ deviceId: 'd2', id: 'o-1', priority: 'low', arrivalMs: t + 1002 });
      const result = await store.queue.admit(other, LIMITS, t + 1002, claimOpts({ owner: 'worker-2', max: 4 }));
      if (result.kind !== 'queued' || !result.along) throw new Error(`expected a claim along, got ${result.kind}`);
      const { jobs } = result.along.claim;
      expect(ids(jobs)).toEqual(['r-1', 'o-1']);
      expect(jobs[0]?.recordedReply).toEqual(reply);
      expect(jobs[1]?.recordedReply).toBeUndefined();
    });

    it('keeps the recorded reply through a release, and hands it back with a job that expired in the queue', async () => {
      const store = await open();
      const t = baseTime();
      const { job, held } = await admitAndClaim(store, t, { deadlineMs: t + 5000 });
      const reply = makeReply(job);
      await store.queue.recordReply(held, reply, 'worker-1');
      await store.queue.release([held], t + 10);
      const { jobs } = await store.queue.claim(claimOpts({ owner: 'worker-2', leaseMs: 1000 }), t + 11);
      expect(jobs[0]?.recordedReply).toEqual(reply);
      expect(await store.queue.reap(3, t + 1012)).toEqual([]);
      // Its deadline passed while it waited again: expired, with its reply (not to be answered `expired`).
      const late = await store.queue.claim(claimOpts({ owner: 'worker-3' }), t + 5000);
      expect(late.jobs).toEqual([]);
      expect(ids(late.expired)).toEqual(['r-1']);
      expect(late.expired[0]?.recordedReply).toEqual(reply);
      await store.queue.complete(late.expired[0] as Job, reply, DONE, t + 5001);
      expect(await store.queue.admit(job, LIMITS, t + 5002)).toEqual({ kind: 'duplicate_done', reply });
    });

    it('keeps no recorded reply on a dead letter: a replay asks again', async () => {
      const store = await open();
      const t = baseTime();
      const { job, held } = await admitAndClaim(store, t);
      const reply = errorReply(job, 'upstream_error');
      await store.queue.recordReply(held, reply, 'worker-1');
      expect(await store.queue.reap(3, t + 1001)).toEqual([]);
      const taken = (await store.queue.claim(claimOpts({ owner: 'worker-2' }), t + 1002)).jobs[0] as ClaimedJob;
      expect(taken.recordedReply).toEqual(reply);
      await store.queue.complete(taken, reply, { ttlS: 3600, deadLetter: true }, t + 1003);
      const [letter] = await allDeadLetters(store);
      expect(letter?.reply).toEqual(reply);
      expect(letter?.job).not.toHaveProperty('recordedReply');
      expect(await store.operations.deadLetters.replayAll(DEFAULT_PRIORITY_OFFSETS_MS, t + 2000)).toBe(1);
      const replayed = (await store.queue.claim(claimOpts({ owner: 'worker-3' }), t + 2000)).jobs;
      expect(ids(replayed)).toEqual(['r-1']);
      expect(replayed[0]?.recordedReply).toBeUndefined();
    });
  });
}
