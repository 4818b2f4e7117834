// Store contract, completion: dead letters (list, replay, purge) and releasing held jobs back
// to the queue.
import { describe, expect, it } from 'vitest';
import { DEFAULT_PRIORITY_OFFSETS_MS } from '../../../bridge/config/config.js';
import type { ClaimedJob, Job } from '../../../bridge/model/job.js';
import { admitAll, allDeadLetters, baseTime, claimOpts, type ContractContext, DONE, errorReply, ids, LIMITS, makeJob, makeReply } from './fixtures.js';

export function completionContract({ open }: ContractContext): void {
  describe('complete, dead letters and release', () => {
    it('lists a job completed with deadLetter: true, with its reply, and not one completed with false', async () => {
      const store = await open();
      const t = baseTime();
      const bad = makeJob({ deviceId: 'd1', id: 'bad', priority: 'high', arrivalMs: t });
      const good = makeJob({ deviceId: 'd2', id: 'good', priority: 'high', arrivalMs: t + 1 });
      await admitAll(store, [bad, good]);
      const { jobs } = await store.queue.claim(claimOpts(), t + 2);
      expect(ids(jobs)).toEqual(['bad', 'good']);
      const badReply = errorReply(bad, 'upstream_error');
      await store.queue.complete(jobs[0] as ClaimedJob, badReply, { ttlS: 3600, deadLetter: true }, t + 3);
      await store.queue.complete(jobs[1] as ClaimedJob, makeReply(good), { ttlS: 3600, deadLetter: false }, t + 4);

      const dlq = await allDeadLetters(store);
      expect(dlq).toHaveLength(1);
      expect(dlq[0]?.job.key).toBe(bad.key);
      expect(dlq[0]?.job.id).toBe('bad');
      expect(dlq[0]?.reply).toEqual(badReply);
      expect(dlq[0]?.atMs).toBe(t + 3);
      expect(await store.queue.admit(bad, LIMITS, t + 5)).toEqual({ kind: 'duplicate_done', reply: badReply });
    });

    it('keeps a raw image with its job while it lives, and only its hash and size in the dead letter', async () => {
      const store = await open();
      const t = baseTime();
      const image = { mime: 'image/jpeg', sha256: 'ab'.repeat(32), bytes: 6, base64: Buffer.from('frame!').toString('base64') };
      const job: Job = { ...makeJob({ deviceId: 'cam', id: 'img', priority: 'normal', arrivalMs: t }), image };
      await admitAll(store, [job]);
      const { jobs } = await store.queue.claim(claimOpts(), t + 1);
      expect(jobs[0]?.image).toEqual(image);
      await store.queue.complete(jobs[0] as ClaimedJob, errorReply(job, 'upstream_error'), { ttlS: 3600, deadLetter: true }, t + 2);
      const [letter] = await allDeadLetters(store);
      expect(letter?.job.image).toEqual({ mime: 'image/jpeg', sha256: 'ab'.repeat(32), bytes: 6 });
    });

    it('replays chosen dead letters as new arrivals with fresh attempts, then all, and purges', async () => {
      const store = await open();
      const t = baseTime();
      const jobs = ['x', 'y', 'z'].map((id, i) =>
        makeJob({ deviceId: 'd1', id, priority: 'low', arrivalMs: t + i, lock: id === 'x' ? 'arm' : undefined, deadlineMs: t + 500 }),
      );
      await admitAll(store, jobs);
      for (const job of (await store.queue.claim(claimOpts(), t + 10)).jobs) {
        await store.queue.complete(job, errorReply(job, 'upstream_error'), { ttlS: 3600, deadLetter: true }, t + 20);
      }
      expect(ids((await allDeadLetters(store)).map((d) => d.job))).toEqual(['x', 'y', 'z']);
      expect((await store.operations.deadLetters.stats(Date.now())).count).toBe(3);

      const later = t + 10_000; // past the old ttl: a replay carries none
      expect(await store.operations.deadLetters.replay([jobs[0]?.key as string, 'd1/unknown'], DEFAULT_PRIORITY_OFFSETS_MS, later)).toBe(1);
      expect(ids((await allDeadLetters(store)).map((d) => d.job))).toEqual(['y', 'z']);
      expect((await store.operations.deadLetters.stats(Date.now())).count).toBe(2);
      expect(await store.queue.admit(jobs[0] as Job, LIMITS, later)).toEqual({ kind: 'duplicate_pending' });
      const { jobs: again, expired } = await store.queue.claim(claimOpts(), later);
      expect(expired).toEqual([]);
      expect(ids(again)).toEqual(['x']);
      expect(again[0]).toMatchObject({ attempts: 0, arrivalMs: later, score: later + 15_000, fence: 2 });
      expect(again[0]?.deadlineMs).toBeUndefined();

      expect(await store.operations.deadLetters.replayAll(DEFAULT_PRIORITY_OFFSETS_MS, later + 1)).toBe(2);
      expect(await allDeadLetters(store)).toEqual([]);
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 2 });

      const rest = (await store.queue.claim(claimOpts(), later + 2)).jobs;
      for (const job of rest) await store.queue.complete(job, errorReply(job, 'upstream_error'), { ttlS: 3600, deadLetter: true }, later + 3);
      expect(await store.operations.deadLetters.purge()).toBe(2);
      expect(await allDeadLetters(store)).toEqual([]);
      expect(await store.operations.deadLetters.purge()).toBe(0);
    });

    it('releases held jobs back to the queue with attempts unchanged and their locks freed', async () => {
      const store = await open();
      const t = baseTime();
      const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t, lock: 'x' });
      const b = makeJob({ deviceId: 'd2', id: 'b', priority: 'normal', arrivalMs: t + 1, lock: 'x' });
      await admitAll(store, [a, b]);
      // a goes once through a reap, so it carries an attempt.
      const first = await store.queue.claim(claimOpts({ leaseMs: 1000, max: 1 }), t + 3);
      expect(ids(first.jobs)).toEqual(['a']);
      expect(await store.queue.reap(3, t + 1004)).toEqual([]);
      const second = await store.queue.claim(claimOpts({ owner: 'worker-2', max: 1 }), t + 1005);
      expect(ids(second.jobs)).toEqual(['a']);
      expect(second.jobs[0]?.attempts).toBe(1);

      await store.queue.release(second.jobs, t + 1006);
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 2, low: 0 }); // a and b
      expect(await store.queue.renew('worker-2', [a.key], 1000, t + 1007)).toEqual([false]);
      const third = await store.queue.claim(claimOpts({ owner: 'worker-3', max: 1 }), t + 1008);
      expect(ids(third.jobs)).toEqual(['a']);
      expect(third.jobs[0]?.attempts).toBe(1);
      expect(third.jobs[0]?.fence).toBeGreaterThan(second.jobs[0]?.fence as number);
      expect(await store.queue.admit(a, LIMITS, t + 1009)).toEqual({ kind: 'duplicate_pending' });

      await store.queue.complete(third.jobs[0] as ClaimedJob, makeReply(a), DONE, t + 1010);
      expect(ids((await store.queue.claim(claimOpts(), t + 1011)).jobs)).toEqual(['b']);
    });

    it('frees the lock of a released job for the job parked behind it', async () => {
      const store = await open();
      const t = baseTime();
      const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t + 5, lock: 'x' });
      const b = makeJob({ deviceId: 'd2', id: 'b', priority: 'critical', arrivalMs: t + 6, lock: 'x' });
      await admitAll(store, [a]);
      const [ha] = (await store.queue.claim(claimOpts(), t + 7)).jobs;
      await admitAll(store, [b]);
      expect((await store.queue.claim(claimOpts(), t + 8)).jobs).toEqual([]);
      await store.queue.release([ha as ClaimedJob], t + 9);
      // b (critical, score t+6) now comes before a (normal, score t+5005).
      const { jobs } = await store.queue.claim(claimOpts(), t + 10);
      expect(ids(jobs)).toEqual(['b']);
      expect(jobs[0]?.fence).toBeGreaterThan(ha?.fence as number);
    });
  });
}
