// Store contract, fair share within a priority class: the next job of a class is the oldest
// of the waiting device with the least service counted (each claim charges the job's
// fairCost; a usage record's fairDelta corrects it); a device that starts waiting takes the
// smallest counter among those waiting, so idleness is no credit; equal counters go to the
// device whose next job comes first; across classes, the best score decides as before.
import { describe, expect, it } from 'vitest';
import type { Job } from '../../../bridge/model/job.js';
import type { Store } from '../../../bridge/store/port.js';
import { admitAll, baseTime, claimOpts, type ContractContext, ids, makeJob } from './fixtures.js';

const job = (deviceId: string, id: string, arrivalMs: number, fairCost = 10, priority: Job['priority'] = 'normal'): Job => ({
  ...makeJob({ deviceId, id, priority, arrivalMs }),
  fairCost,
});

/** Claims one job at a time until the queue is empty; the ids in claim order. */
async function claimAll(store: Store, now: number): Promise<string[]> {
  const order: string[] = [];
  for (let i = 0; i < 50; i += 1) {
    const { jobs } = await store.queue.claim(claimOpts({ max: 1 }), now + i);
    if (jobs.length === 0) break;
    order.push(...ids(jobs));
  }
  return order;
}

export function fairnessContract({ open }: ContractContext): void {
  describe('fair share within a class', () => {
    it('serves the waiting device with the least service first, not the earliest job', async () => {
      const store = await open();
      const t = baseTime();
      await admitAll(store, [job('a', 'a1', t), job('a', 'a2', t), job('a', 'a3', t), job('a', 'a4', t)], t);
      await admitAll(store, [job('b', 'b1', t + 1), job('b', 'b2', t + 1)], t + 1);
      expect(await claimAll(store, t + 10)).toEqual(['a1', 'b1', 'a2', 'b2', 'a3', 'a4']);
    });

    it('shares by cost: a device whose requests cost half gets twice the claims', async () => {
      const store = await open();
      const t = baseTime();
      const light = Array.from({ length: 6 }, (_, i) => job('light', `l${i}`, t + 1, 5));
      const heavy = Array.from({ length: 6 }, (_, i) => job('heavy', `h${i}`, t, 10));
      await admitAll(store, [...heavy, ...light], t + 1);
      const first = (await claimAll(store, t + 10)).slice(0, 9);
      expect(first.filter((id) => id.startsWith('l'))).toHaveLength(6);
      expect(first.filter((id) => id.startsWith('h'))).toHaveLength(3);
    });

    it('gives a device that starts waiting the smallest counter of the waiting ones: idleness is no credit', async () => {
      const store = await open();
      const t = baseTime();
      await admitAll(
        store,
        Array.from({ length: 5 }, (_, i) => job('a', `a${i + 1}`, t)),
        t,
      );
      expect(ids((await store.queue.claim(claimOpts({ max: 2 }), t + 1)).jobs)).toEqual(['a1', 'a2']);
      await admitAll(
        store,
        Array.from({ length: 3 }, (_, i) => job('b', `b${i + 1}`, t + 2)),
        t + 2,
      );
      // b starts at a's 20, not at 0: they alternate rather than b's three going first.
      expect(await claimAll(store, t + 10)).toEqual(['a3', 'b1', 'a4', 'b2', 'a5', 'b3']);
    });

    it('keeps priority with aging across classes: fair share only picks within the class', async () => {
      const store = await open();
      const t = baseTime();
      await admitAll(store, [job('a', 'n1', t), job('a', 'n2', t), job('b', 'h1', t + 1, 10, 'high'), job('c', 'l1', t, 10, 'low')], t + 1);
      await admitAll(store, [job('b', 'n3', t + 2)], t + 2);
      expect(await claimAll(store, t + 10)).toEqual(['h1', 'n1', 'n3', 'n2', 'l1']);
    });

    it('never lets a fair pick pass a job of another class with a better score (aging holds)', async () => {
      const store = await open();
      const t = baseTime();
      // b's n3 arrived more than 15 s after the low l1: it must not go first, though b has the smaller counter.
      await admitAll(store, [job('a', 'n1', t), job('a', 'n2', t), job('b', 'n3', t + 20_000), job('c', 'l1', t + 1, 10, 'low')], t + 20_000);
      expect(await claimAll(store, t + 20_010)).toEqual(['n1', 'n2', 'l1', 'n3']);
    });

    it('corrects a counter with the usage: a device that used more than its estimate waits', async () => {
      const store = await open();
      const t = baseTime();
      await admitAll(store, [job('a', 'a1', t), job('a', 'a2', t), job('a', 'a3', t), job('b', 'b1', t), job('b', 'b2', t), job('b', 'b3', t)], t);
      expect(ids((await store.queue.claim(claimOpts({ max: 2 }), t + 1)).jobs)).toEqual(['a1', 'b1']);
      await store.answers.recordUsage(
        { deviceId: 'a', model: 'm', priority: 'normal', promptTokens: 50, completionTokens: 30, costUsd: 0, fairDelta: 100 },
        t + 2,
      );
      await store.operations.usage(t, t + 3); // the Redis store writes usage once a second; a report writes it now
      expect(await claimAll(store, t + 10)).toEqual(['b2', 'b3', 'a2', 'a3']);
    });
  });
}
