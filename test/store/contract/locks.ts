// Store contract, locks: one holder per lock, parked jobs behind it, and fences that rise with
// every grant, whether the holder completes or its lease is reaped.
import { describe, expect, it } from 'vitest';
import type { ClaimedJob } from '../../../bridge/model/job.js';
import { admitAll, baseTime, claimOpts, type ContractContext, DONE, ids, makeJob, makeReply } from './fixtures.js';

export function locksContract({ open }: ContractContext): void {
  describe('locks', () => {
    it('never grants one lock to two jobs at once', async () => {
      const store = await open();
      const t = baseTime();
      const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t, lock: 'x' });
      const b = makeJob({ deviceId: 'd2', id: 'b', priority: 'normal', arrivalMs: t + 1, lock: 'x' });
      await admitAll(store, [a, b]);
      expect(ids((await store.queue.claim(claimOpts({ max: 2 }), t + 2)).jobs)).toEqual(['a']);
      expect((await store.queue.claim(claimOpts({ max: 2, owner: 'worker-2' }), t + 3)).jobs).toEqual([]);
      expect((await store.queue.claim(claimOpts({ max: 2 }), t + 1000)).jobs).toEqual([]);
    });

    it('parks a job behind a held lock without blocking the jobs behind it', async () => {
      const store = await open();
      const t = baseTime();
      const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t, lock: 'x' });
      const b = makeJob({ deviceId: 'd2', id: 'b', priority: 'normal', arrivalMs: t + 1, lock: 'x' });
      const c = makeJob({ deviceId: 'd3', id: 'c', priority: 'normal', arrivalMs: t + 2 });
      const d = makeJob({ deviceId: 'd4', id: 'd', priority: 'normal', arrivalMs: t + 3, lock: 'y' });
      await admitAll(store, [a, b, c, d]);
      expect(ids((await store.queue.claim(claimOpts({ max: 3 }), t + 4)).jobs)).toEqual(['a', 'c', 'd']);
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 1, low: 0 }); // b, parked
      const e = makeJob({ deviceId: 'd5', id: 'e', priority: 'normal', arrivalMs: t + 5 });
      await admitAll(store, [e]);
      expect(ids((await store.queue.claim(claimOpts({ max: 3 }), t + 6)).jobs)).toEqual(['e']);
    });

    it('hands the lock to the next parked job when the holder completes, with a higher fence', async () => {
      const store = await open();
      const t = baseTime();
      const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t, lock: 'x' });
      const b = makeJob({ deviceId: 'd2', id: 'b', priority: 'normal', arrivalMs: t + 1, lock: 'x' });
      const c = makeJob({ deviceId: 'd3', id: 'c', priority: 'normal', arrivalMs: t + 2, lock: 'x' });
      await admitAll(store, [a, b, c]);
      const [ha] = (await store.queue.claim(claimOpts(), t + 3)).jobs;
      expect(ha?.id).toBe('a');
      expect((await store.queue.claim(claimOpts(), t + 4)).jobs).toEqual([]);

      await store.queue.complete(ha as ClaimedJob, makeReply(a), DONE, t + 5);
      const second = await store.queue.claim(claimOpts(), t + 6);
      expect(ids(second.jobs)).toEqual(['b']);
      const hb = second.jobs[0] as ClaimedJob;
      expect(hb.fence).toBeGreaterThan(ha?.fence as number);

      await store.queue.complete(hb, makeReply(b), DONE, t + 7);
      const third = await store.queue.claim(claimOpts(), t + 8);
      expect(ids(third.jobs)).toEqual(['c']);
      expect(third.jobs[0]?.fence).toBeGreaterThan(hb.fence as number);
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
    });

    it("raises a key's fence with every grant, whatever other keys are granted between, from one counter for all", async () => {
      const store = await open();
      const t = baseTime();
      const fences: Record<string, number[]> = { x: [], y: [] };
      const all: number[] = [];
      const grant = async (lock: string, id: string, at: number): Promise<void> => {
        const job = makeJob({ deviceId: 'd1', id, priority: 'normal', arrivalMs: at, lock });
        await admitAll(store, [job]);
        const { jobs } = await store.queue.claim(claimOpts(), at);
        expect(ids(jobs)).toEqual([id]);
        const held = jobs[0] as ClaimedJob;
        expect(Number.isSafeInteger(held.fence)).toBe(true);
        fences[lock]?.push(held.fence as number);
        all.push(held.fence as number);
        await store.queue.complete(held, makeReply(job), DONE, at);
      };
      await grant('y', 'y1', t);
      await grant('x', 'x1', t + 1);
      await grant('x', 'x2', t + 2);
      await grant('x', 'x3', t + 3);
      await grant('y', 'y2', t + 4);
      const [x1, x2, x3] = fences.x as [number, number, number];
      const [y1, y2] = fences.y as [number, number];
      expect(x1).toBeGreaterThanOrEqual(1);
      expect(x2).toBeGreaterThan(x1);
      expect(x3).toBeGreaterThan(x2);
      expect(y2).toBeGreaterThan(y1);
      // Drawn from one counter: every grant's number is new, so no lock name needs remembering.
      expect(new Set(all).size).toBe(all.length);
    });

    it('grants each of many distinct lock names a fence above every earlier grant', async () => {
      const store = await open();
      const t = baseTime();
      const jobs = Array.from({ length: 200 }, (_, i) => makeJob({ deviceId: 'd1', id: `n${i}`, priority: 'normal', arrivalMs: t + i, lock: `ライン-${i}` }));
      await admitAll(store, jobs);
      const { jobs: held } = await store.queue.claim(claimOpts({ max: 200, rpm: 1000 }), t + 300);
      expect(held).toHaveLength(200);
      for (const job of held) await store.queue.complete(job, makeReply(job), DONE, t + 301);
      const again = makeJob({ deviceId: 'd1', id: 'again', priority: 'normal', arrivalMs: t + 302, lock: 'ライン-0' });
      await admitAll(store, [again]);
      const [regranted] = (await store.queue.claim(claimOpts(), t + 303)).jobs;
      expect(regranted?.fence).toBeGreaterThan(Math.max(...held.map((j) => j.fence as number)));
    });

    it("frees the lock when the holder's lease expires and is reaped; the next holder gets a higher fence", async () => {
      const store = await open();
      const t = baseTime();
      const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t, lock: 'x' });
      const b = makeJob({ deviceId: 'd2', id: 'b', priority: 'normal', arrivalMs: t + 1, lock: 'x' });
      await admitAll(store, [a, b]);
      const [ha] = (await store.queue.claim(claimOpts({ leaseMs: 1000 }), t + 2)).jobs;
      expect(ha?.id).toBe('a');
      expect((await store.queue.claim(claimOpts(), t + 3)).jobs).toEqual([]);

      const exhausted = await store.queue.reap(1, t + 2 + 1001);
      expect(ids(exhausted)).toEqual(['a']);
      const { jobs } = await store.queue.claim(claimOpts({ owner: 'worker-2' }), t + 2 + 1002);
      expect(ids(jobs)).toEqual(['b']);
      expect(jobs[0]?.fence).toBeGreaterThan(ha?.fence as number);
    });

    it('gives a reaped and requeued holder a fresh grant with a higher fence, ahead of a later job', async () => {
      const store = await open();
      const t = baseTime();
      const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t, lock: 'x' });
      const b = makeJob({ deviceId: 'd2', id: 'b', priority: 'normal', arrivalMs: t + 1, lock: 'x' });
      await admitAll(store, [a, b]);
      const [ha] = (await store.queue.claim(claimOpts({ leaseMs: 1000 }), t + 2)).jobs;
      expect(await store.queue.reap(3, t + 2 + 1001)).toEqual([]);
      const again = await store.queue.claim(claimOpts({ owner: 'worker-2' }), t + 2 + 1002);
      expect(ids(again.jobs)).toEqual(['a']);
      expect(again.jobs[0]?.attempts).toBe(1);
      expect(again.jobs[0]?.fence).toBeGreaterThan(ha?.fence as number);
      await store.queue.complete(again.jobs[0] as ClaimedJob, makeReply(a), DONE, t + 3000);
      const last = await store.queue.claim(claimOpts(), t + 3001);
      expect(ids(last.jobs)).toEqual(['b']);
      expect(last.jobs[0]?.fence).toBeGreaterThan(again.jobs[0]?.fence as number);
    });

    it("loses and duplicates no job when a claim meets a lock whose holder's lease expired before any reap", async () => {
      const store = await open();
      const t = baseTime();
      const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t, lock: 'x' });
      const b = makeJob({ deviceId: 'd2', id: 'b', priority: 'normal', arrivalMs: t + 1, lock: 'x' });
      await admitAll(store, [a, b]);
      const [ha] = (await store.queue.claim(claimOpts({ leaseMs: 1000 }), t + 2)).jobs;
      expect(ha?.id).toBe('a');
      expect((await store.queue.claim(claimOpts(), t + 3)).jobs).toEqual([]); // b parked behind a
      const c = makeJob({ deviceId: 'd3', id: 'c', priority: 'normal', arrivalMs: t + 4, lock: 'x' });
      await admitAll(store, [c]);

      // a's lease ran out at t+1002; nobody has reaped yet.
      let now = t + 2000;
      const granted: ClaimedJob[] = [ha as ClaimedJob];
      for (let round = 0; round < 8; round += 1) {
        const { jobs } = await store.queue.claim(claimOpts({ max: 10 }), now);
        expect(jobs.length).toBeLessThanOrEqual(1); // one holder of x at a time
        for (const held of jobs) {
          granted.push(held);
          await store.queue.complete(held, makeReply(held), DONE, now);
        }
        await store.queue.reap(3, now);
        now += 1;
      }
      expect(
        granted
          .slice(1)
          .map((j) => j.id)
          .sort(),
      ).toEqual(['a', 'b', 'c']);
      const fences = granted.map((j) => j.fence as number);
      for (let i = 1; i < fences.length; i += 1) expect(fences[i]).toBeGreaterThan(fences[i - 1] as number);
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
    });
  });
}
