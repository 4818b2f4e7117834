// Store contract, upstream rate limits: rpm and tpm over a rolling minute, shared by claim
// and takeRate, and the upstream pause. A call counts until the end of its 2 s bucket plus a
// minute (leaves()).
import { describe, expect, it } from 'vitest';
import type { ClaimedJob, Job } from '../../../bridge/model/job.js';
import type { Store } from '../../../bridge/store/port.js';
import { admitAll, baseTime, claimOpts, type ContractContext, ids, leaves, makeJob } from './fixtures.js';

export function rateLimitsContract({ open }: ContractContext): void {
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
      expect(ids((await store.queue.claim(opts, t + 10)).jobs)).toEqual(['r0']);
      expect(ids((await store.queue.claim(opts, t + 10_000)).jobs)).toEqual(['r1']);
      expect(ids((await store.queue.claim(opts, t + 20_000)).jobs)).toEqual(['r2']);
      expect(await store.queue.claim(opts, t + 30_000)).toEqual({ jobs: [], expired: [], retryAtMs: leaves(t + 10) });
      expect(await store.queue.claim(opts, leaves(t + 10) - 1)).toEqual({ jobs: [], expired: [], retryAtMs: leaves(t + 10) });

      const rolled = await store.queue.claim(claimOpts({ rpm: 3, max: 10 }), leaves(t + 10));
      expect(ids(rolled.jobs)).toEqual(['r3']);
      const blocked = await store.queue.claim(claimOpts({ rpm: 3, max: 10 }), leaves(t + 10) + 1);
      expect(blocked).toEqual({ jobs: [], expired: [], retryAtMs: leaves(t + 10_000) });
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 2, low: 0 });
    });

    it('claims no more than rpm jobs in one call', async () => {
      const store = await open();
      const t = baseTime();
      await queueN(store, 5, t);
      expect(ids((await store.queue.claim(claimOpts({ rpm: 2, max: 10 }), t + 10)).jobs)).toEqual(['r0', 'r1']);
      expect(await store.queue.claim(claimOpts({ rpm: 2, max: 10 }), t + 11)).toEqual({ jobs: [], expired: [], retryAtMs: leaves(t + 10) });
    });

    it('limits the summed tokenEstimate of claims in 60 s to tpm', async () => {
      const store = await open();
      const t = baseTime();
      await queueN(store, 4, t, 400);
      const opts = claimOpts({ tpm: 1000, max: 1 });
      expect(ids((await store.queue.claim(opts, t + 10)).jobs)).toEqual(['r0']);
      expect(ids((await store.queue.claim(opts, t + 5000)).jobs)).toEqual(['r1']);
      // 800 used; another 400 needs r0's 400 out of the window.
      expect(await store.queue.claim(opts, t + 6000)).toEqual({ jobs: [], expired: [], retryAtMs: leaves(t + 10) });
      expect(ids((await store.queue.claim(opts, leaves(t + 10))).jobs)).toEqual(['r2']);
      expect(await store.queue.claim(opts, leaves(t + 10) + 1)).toEqual({ jobs: [], expired: [], retryAtMs: leaves(t + 5000) });
    });

    it('lets a job larger than tpm run alone once the window is empty', async () => {
      const store = await open();
      const t = baseTime();
      await queueN(store, 2, t, 5000);
      const opts = claimOpts({ tpm: 1000, max: 10 });
      expect(ids((await store.queue.claim(opts, t + 10)).jobs)).toEqual(['r0']);
      const blocked = await store.queue.claim(opts, t + 20);
      expect(blocked.jobs).toEqual([]);
      expect(blocked.retryAtMs).toBe(leaves(t + 10));
      expect(ids((await store.queue.claim(opts, leaves(t + 10))).jobs)).toEqual(['r1']);
    });

    it('settles a call to 0 (refused before it generated), freeing its tokens at once', async () => {
      const store = await open();
      const t = baseTime();
      await queueN(store, 1, t, 800);
      const claimed = (await store.queue.claim(claimOpts({ tpm: 1000 }), t + 10)).jobs[0] as ClaimedJob;
      expect(await store.limits.takeRate(800, 100, 1000, t + 20)).toEqual({ ok: false, retryAtMs: leaves(t + 10) });
      await store.limits.settleTokens(claimed.callId, 0);
      expect((await store.limits.takeRate(800, 100, 1000, t + 30)).ok).toBe(true);
      expect(await store.limits.takeRate(201, 100, 1000, t + 40)).toEqual({ ok: false, retryAtMs: leaves(t + 30) });
    });

    it('gives call ids of digits that settle exactly, at 1e14 tokens and more', async () => {
      const store = await open();
      const t = baseTime();
      const huge = 1e14 + 7;
      await queueN(store, 1, t, huge);
      const tpm = 3e14;
      const claimed = (await store.queue.claim(claimOpts({ tpm }), t + 10)).jobs[0] as ClaimedJob;
      const taken = await store.limits.takeRate(2e16 + 4, 100, 4e16, t + 20);
      if (!taken.ok) throw new Error('expected the call to fit');
      for (const id of [claimed.callId, taken.callId]) expect(id).toMatch(/^-?\d+(:\d+)?$/);
      expect((await store.limits.takeRate(2e14, 100, tpm, t + 30)).ok).toBe(false);
      await store.limits.settleTokens(claimed.callId, 0);
      await store.limits.settleTokens(taken.callId, 0);
      expect((await store.limits.takeRate(2e14, 100, tpm, t + 40)).ok).toBe(true);
      // Settled exactly: 2e14 + 1e14 fills tpm to the token, one more does not fit.
      expect((await store.limits.takeRate(1e14, 100, tpm, t + 50)).ok).toBe(true);
      expect((await store.limits.takeRate(1, 100, tpm, t + 60)).ok).toBe(false);
    });

    it('takeRate spends and respects the same rpm budget as claim', async () => {
      const store = await open();
      const t = baseTime();
      await queueN(store, 1, t);
      expect(ids((await store.queue.claim(claimOpts({ rpm: 2 }), t + 10)).jobs)).toEqual(['r0']);
      expect((await store.limits.takeRate(10, 2, undefined, t + 20)).ok).toBe(true);
      // The claim's token and the retry's token fill rpm 2: the next retry waits for the claim's to leave.
      expect(await store.limits.takeRate(10, 2, undefined, t + 30)).toEqual({ ok: false, retryAtMs: leaves(t + 10) });
      expect(await store.limits.takeRate(10, 2, undefined, leaves(t + 10) - 1)).toEqual({ ok: false, retryAtMs: leaves(t + 10) });
      // The claim's call and the retry's share a bucket: they leave the window together.
      const later = leaves(t + 10);
      expect((await store.limits.takeRate(10, 2, undefined, later)).ok).toBe(true);
      expect((await store.limits.takeRate(10, 2, undefined, later + 1)).ok).toBe(true);
      expect(await store.limits.takeRate(10, 2, undefined, later + 2)).toEqual({ ok: false, retryAtMs: leaves(later) });
    });

    it('shares one budget between takeRate and claim, for rpm and tpm alike', async () => {
      const store = await open();
      const t = baseTime();
      await queueN(store, 1, t, 300);
      expect((await store.limits.takeRate(300, 2, 1000, t + 10)).ok).toBe(true);
      expect((await store.limits.takeRate(300, 2, 1000, t + 20)).ok).toBe(true);
      // rpm 2 spent by takeRate: claim waits for the first call to leave the window.
      expect(await store.queue.claim(claimOpts({ rpm: 2, tpm: 1000 }), t + 30)).toEqual({ jobs: [], expired: [], retryAtMs: leaves(t + 10) });
      expect(ids((await store.queue.claim(claimOpts({ rpm: 3, tpm: 1000 }), t + 40)).jobs)).toEqual(['r0']);
      // 900 tokens used: 300 more would exceed tpm 1000 until the first 300 leave.
      expect(await store.limits.takeRate(300, 10, 1000, t + 50)).toEqual({ ok: false, retryAtMs: leaves(t + 10) });
      expect((await store.limits.takeRate(100, 10, 1000, t + 60)).ok).toBe(true);
      expect(await store.limits.takeRate(1, 10, 1000, t + 70)).toEqual({ ok: false, retryAtMs: leaves(t + 10) });
      expect((await store.limits.takeRate(300, 10, 1000, leaves(t + 10))).ok).toBe(true);
    });

    it('pauseUpstream stops claims and takeRate until the pause ends, and a shorter pause does not shorten it', async () => {
      const store = await open();
      const t = baseTime();
      await queueN(store, 2, t);
      await store.limits.pauseUpstream(t + 5000);
      await store.limits.pauseUpstream(t + 3000);
      expect(await store.queue.claim(claimOpts(), t + 10)).toEqual({ jobs: [], expired: [], retryAtMs: t + 5000 });
      expect(await store.limits.takeRate(10, 100, undefined, t + 20)).toEqual({ ok: false, retryAtMs: t + 5000 });
      expect(await store.queue.claim(claimOpts(), t + 4999)).toEqual({ jobs: [], expired: [], retryAtMs: t + 5000 });
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 2, low: 0 });
      // The pause took no budget: with rpm 2 both jobs go at its end.
      expect(ids((await store.queue.claim(claimOpts({ rpm: 2 }), t + 5000)).jobs)).toEqual(['r0', 'r1']);
    });

    it('lets takeRate succeed once the pause ends', async () => {
      const store = await open();
      const t = baseTime();
      await store.limits.pauseUpstream(t + 1000);
      expect((await store.limits.takeRate(10, 1, undefined, t + 999)).ok).toBe(false);
      expect((await store.limits.takeRate(10, 1, undefined, t + 1000)).ok).toBe(true);
      expect(await store.limits.takeRate(10, 1, undefined, t + 1001)).toEqual({ ok: false, retryAtMs: leaves(t + 1000) });
    });
  });
}
