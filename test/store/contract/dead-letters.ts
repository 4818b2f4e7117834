// Store contract, dead letters: within DLQ_MAX entries and DLQ_MAX_BYTES (the oldest dropped
// and counted), nothing past DLQ_TTL_S, read a page (cursor) or one entry at a time, one entry
// per job, and replay-all a page at a time.
import { describe, expect, it } from 'vitest';
import { DEFAULT_PRIORITY_OFFSETS_MS } from '../../../bridge/config/config.js';
import type { DeadLetterBounds, Store } from '../../../bridge/store/port.js';
import type { Job } from '../../../bridge/model/job.js';
import { admitAll, allDeadLetters, baseTime, claimOpts, type ContractContext, errorReply, ids, makeJob } from './fixtures.js';

const BOUNDS: DeadLetterBounds = { max: 1000, maxBytes: 64 * 1024 * 1024, ttlS: 3600 };

/** Admits, claims and dead-letters `jobs`, the i-th at `at + i`. */
async function deadLetter(store: Store, jobs: Job[], at: number): Promise<void> {
  await admitAll(store, jobs);
  const { jobs: held } = await store.queue.claim(claimOpts({ max: jobs.length, rpm: 100_000 }), at);
  expect(held).toHaveLength(jobs.length);
  for (const [i, job] of held.entries()) await store.queue.complete(job, errorReply(job, 'upstream_error'), { ttlS: 3600, deadLetter: true }, at + i);
}

const jobsOf = (n: number, t: number, content?: (i: number) => string): Job[] =>
  Array.from({ length: n }, (_, i) => makeJob({ deviceId: 'cam', id: `e${i}`, priority: 'normal', arrivalMs: t + i, content: content?.(i) }));

export function deadLettersContract({ open }: ContractContext): void {
  describe('dead letters: bounds, pages, lookups', () => {
    it('keeps at most DLQ_MAX entries, dropping the oldest and counting them', async () => {
      const store = await open({ deadLetters: { ...BOUNDS, max: 3 } });
      const t = baseTime();
      await deadLetter(store, jobsOf(5, t), t + 10);
      expect(ids((await allDeadLetters(store, t + 20)).map((d) => d.job))).toEqual(['e2', 'e3', 'e4']);
      expect((await store.operations.deadLetters.stats(t + 20)).count).toBe(3);
      expect(store.operations.deadLetters.dropped()).toBe(2);
    });

    it("keeps the entries' stored size within DLQ_MAX_BYTES; one entry alone over it is not kept", async () => {
      const store = await open({ deadLetters: { ...BOUNDS, maxBytes: 8000 } });
      const t = baseTime();
      await deadLetter(
        store,
        jobsOf(6, t, (i) => `${i}`.padEnd(3000, 'x')),
        t + 10,
      );
      const { count, bytes } = await store.operations.deadLetters.stats(t + 20);
      expect(count).toBe(2); // about 3.4 KB each
      expect(bytes).toBeGreaterThan(6000);
      expect(bytes).toBeLessThanOrEqual(8000);
      expect(ids((await allDeadLetters(store, t + 20)).map((d) => d.job))).toEqual(['e4', 'e5']);
      expect(store.operations.deadLetters.dropped()).toBe(4);

      const huge = makeJob({ deviceId: 'cam', id: 'huge', priority: 'normal', arrivalMs: t + 30, content: 'y'.repeat(9000) });
      await deadLetter(store, [huge], t + 40);
      expect(ids((await allDeadLetters(store, t + 50)).map((d) => d.job))).toEqual(['e4', 'e5']);
      expect(store.operations.deadLetters.dropped()).toBe(5);
    });

    it('forgets entries past DLQ_TTL_S, in pages, lookups and the count', async () => {
      const store = await open({ deadLetters: { ...BOUNDS, ttlS: 10 } });
      const t = baseTime();
      const [old, young] = jobsOf(2, t);
      await deadLetter(store, [old as Job], t);
      await deadLetter(store, [young as Job], t + 5000);
      const later = t + 12_000;
      expect(ids((await allDeadLetters(store, later)).map((d) => d.job))).toEqual(['e1']);
      expect(await store.operations.deadLetters.get((old as Job).key, later)).toBeUndefined();
      expect((await store.operations.deadLetters.get((young as Job).key, later))?.job.id).toBe('e1');
      expect((await store.operations.deadLetters.stats(later)).count).toBe(1);
      expect(await store.operations.deadLetters.replay([(old as Job).key], DEFAULT_PRIORITY_OFFSETS_MS, later)).toBe(0);
      expect(store.operations.deadLetters.dropped()).toBe(0); // aged out, not dropped for a bound
    });

    it('pages oldest first with a cursor, and finds one entry without the others', async () => {
      const store = await open({ deadLetters: BOUNDS });
      const t = baseTime();
      await deadLetter(store, jobsOf(7, t), t + 10);
      const first = await store.operations.deadLetters.page(3, undefined, t + 20);
      expect(ids(first.entries.map((d) => d.job))).toEqual(['e0', 'e1', 'e2']);
      const second = await store.operations.deadLetters.page(3, first.next, t + 20);
      expect(ids(second.entries.map((d) => d.job))).toEqual(['e3', 'e4', 'e5']);
      const last = await store.operations.deadLetters.page(3, second.next, t + 20);
      expect(ids(last.entries.map((d) => d.job))).toEqual(['e6']);
      expect(last.next).toBeUndefined();
      expect((await store.operations.deadLetters.page(7, undefined, t + 20)).next).toBeUndefined();
      expect(await store.operations.deadLetters.get('cam/e4', t + 20)).toMatchObject({
        job: { id: 'e4' },
        reply: { ok: false, error: { code: 'upstream_error' } },
        atMs: t + 14,
      });
      expect(await store.operations.deadLetters.get('cam/nope', t + 20)).toBeUndefined();
      await expect(store.operations.deadLetters.page(3, 'not-a-cursor', t + 20)).rejects.toThrow();
      // A cursor still works once its entry is gone.
      await store.operations.deadLetters.replay(['cam/e2', 'cam/e3'], DEFAULT_PRIORITY_OFFSETS_MS, t + 30);
      expect(ids((await store.operations.deadLetters.page(10, first.next, t + 40)).entries.map((d) => d.job))).toEqual(['e4', 'e5', 'e6']);
    });

    it('keeps one entry per job: dead-lettered again, it replaces the earlier one', async () => {
      const store = await open({ deadLetters: BOUNDS });
      const t = baseTime();
      const [job] = jobsOf(1, t);
      await deadLetter(store, [job as Job], t + 10);
      expect(await store.operations.deadLetters.replay([(job as Job).key], DEFAULT_PRIORITY_OFFSETS_MS, t + 20)).toBe(1);
      const [again] = (await store.queue.claim(claimOpts(), t + 20_000)).jobs;
      if (!again) throw new Error('the replayed job was not queued');
      const timedOut = { id: again.id, ok: false as const, error: { code: 'upstream_timeout' as const, message: 'no answer in time' } };
      await store.queue.complete(again, timedOut, { ttlS: 3600, deadLetter: true }, t + 20_001);
      const all = await allDeadLetters(store, t + 20_002);
      expect(all.map((d) => [d.job.id, d.atMs, d.reply.ok ? null : d.reply.error.code])).toEqual([['e0', t + 20_001, 'upstream_timeout']]);
      expect((await store.operations.deadLetters.stats(t + 20_002)).count).toBe(1);
    });

    it('replays every entry a page at a time, more than one page of them', async () => {
      const store = await open({ deadLetters: BOUNDS });
      const t = baseTime();
      await deadLetter(store, jobsOf(230, t), t + 300);
      expect(await store.operations.deadLetters.replayAll(DEFAULT_PRIORITY_OFFSETS_MS, t + 1000)).toBe(230);
      expect(await store.operations.deadLetters.stats(t + 1000)).toMatchObject({ count: 0 });
      expect(await store.operations.queueDepth()).toMatchObject({ normal: 230 });
      expect(await store.operations.deadLetters.purge()).toBe(0);
    });
  });
}
