// Store contract, leases: renewal by the owner only, and the reap that requeues an expired
// lease or returns the job as exhausted.
import { describe, expect, it } from 'vitest';
import type { Job } from '../../../bridge/model/job.js';
import { admitAndClaim, baseTime, claimOpts, type ContractContext, errorReply, ids, LIMITS, sameJob } from './fixtures.js';

export function leasesContract({ open }: ContractContext): void {
  describe('leases', () => {
    it('extends a lease its owner renews, so it is not reaped at the old expiry', async () => {
      const store = await open();
      const t = baseTime();
      const { held } = await admitAndClaim(store, t);
      expect(await store.queue.renew('worker-1', [held.key], 1000, t + 500)).toEqual([true]);
      expect(await store.queue.reap(3, t + 1001)).toEqual([]);
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
      expect((await store.queue.claim(claimOpts(), t + 1002)).jobs).toEqual([]);
      expect(await store.queue.renew('worker-1', [held.key], 1000, t + 1400)).toEqual([true]);
      expect(await store.queue.reap(3, t + 2401)).toEqual([]);
      expect(ids((await store.queue.claim(claimOpts(), t + 2402)).jobs)).toEqual(['r-1']);
    });

    it('refuses renewal by another owner, of an unknown key, or of an expired lease', async () => {
      const store = await open();
      const t = baseTime();
      const { held } = await admitAndClaim(store, t);
      expect(await store.queue.renew('worker-2', [held.key], 1000, t + 100)).toEqual([false]);
      expect(await store.queue.renew('worker-1', ['d9/unknown'], 1000, t + 100)).toEqual([false]);
      expect(await store.queue.renew('worker-1', ['d9/unknown', held.key], 1000, t + 100)).toEqual([false, true]);
      expect(await store.queue.renew('worker-1', [], 1000, t + 100)).toEqual([]);
      // Lease now runs to t+1100; a renewal after that comes too late.
      expect(await store.queue.renew('worker-1', [held.key], 1000, t + 1101)).toEqual([false]);
    });

    it('requeues a job whose lease expired with attempts + 1', async () => {
      const store = await open();
      const t = baseTime();
      const { job, held } = await admitAndClaim(store, t);
      expect(held.attempts).toBe(0);
      expect(await store.queue.reap(3, t + 1000 + 1)).toEqual([]);
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 1, low: 0 });
      expect(await store.queue.renew('worker-1', [held.key], 1000, t + 1002)).toEqual([false]);
      expect(await store.queue.admit(job, LIMITS, t + 1003)).toEqual({ kind: 'duplicate_pending' });
      const { jobs } = await store.queue.claim(claimOpts({ owner: 'worker-2' }), t + 1004);
      expect(ids(jobs)).toEqual(['r-1']);
      expect(jobs[0]?.attempts).toBe(1);
      expect(jobs[0]?.owner).toBe('worker-2');
      expect(await store.queue.renew('worker-2', [held.key], 1000, t + 1005)).toEqual([true]);
    });

    it('returns a job as exhausted instead of requeueing it once its attempts reach maxAttempts', async () => {
      const store = await open();
      const t = baseTime();
      const { job } = await admitAndClaim(store, t);
      expect(await store.queue.reap(2, t + 1001)).toEqual([]);
      const { jobs } = await store.queue.claim(claimOpts({ leaseMs: 1000 }), t + 1002);
      expect(jobs[0]?.attempts).toBe(1);
      const exhausted = await store.queue.reap(2, t + 2003);
      expect(ids(exhausted)).toEqual(['r-1']);
      sameJob(exhausted[0] as Job, { ...job, attempts: 2 });
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
      expect(await store.queue.claim(claimOpts(), t + 2004)).toEqual({ jobs: [], expired: [], retryAtMs: undefined });
      expect(await store.queue.reap(2, t + 9999)).toEqual([]);

      const reply = errorReply(job, 'upstream_error');
      await store.queue.complete(exhausted[0] as Job, reply, { ttlS: 3600, deadLetter: true }, t + 2005);
      expect(await store.queue.admit(job, LIMITS, t + 2006)).toEqual({ kind: 'duplicate_done', reply });
    });

    it('does not reap a lease before it expires', async () => {
      const store = await open();
      const t = baseTime();
      await admitAndClaim(store, t);
      expect(await store.queue.reap(1, t + 999)).toEqual([]);
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
      expect((await store.queue.claim(claimOpts(), t + 999)).jobs).toEqual([]);
    });
  });
}
