// Store contract, cache and coalescing: cached answers, one leader per cache key, the
// completion that books cache, flight and usage at once, and usage per hour.
import { describe, expect, it } from 'vitest';
import type { Priority } from '../../../contract/index.js';
import type { ClaimedJob } from '../../../bridge/model/job.js';
import { baseTime, claimOpts, type ContractContext, DONE, leadOneOf, makeJob, makeReply } from './fixtures.js';

export function cacheContract({ open }: ContractContext): void {
  describe('cache, coalescing and usage', () => {
    const answer = {
      model: 'gpt-4o-mini',
      content: 'No scratch found.',
      finish_reason: 'stop',
      usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 },
    };

    it('admit answers `cached` for a fresh cached answer, after the quota and idempotency checks, recording nothing', async () => {
      const store = await open();
      const t = baseTime();
      const limits = { deviceRpm: 4, queueMax: 0 }; // a full queue does not stop a cache hit
      await store.answers.cacheSet('hc', answer, 1000, t);
      const job = { ...makeJob({ deviceId: 'd1', id: 'c1', priority: 'normal', arrivalMs: t }), cacheKey: 'hc' };
      expect(await store.queue.admit(job, limits, t + 1)).toEqual({ kind: 'cached', answer });
      expect(await store.queue.admit(job, limits, t + 2)).toEqual({ kind: 'cached', answer }); // nothing was recorded
      // admitAnswered records the answer; the quota counted the publish in admit.
      expect(await store.answers.admitAnswered(job, makeReply(job), 3600, t + 3)).toEqual({ kind: 'answered' });
      expect(await store.queue.admit(job, limits, t + 4)).toEqual({ kind: 'duplicate_done', reply: makeReply(job) });
      const second = { ...makeJob({ deviceId: 'd1', id: 'c2', priority: 'normal', arrivalMs: t }), cacheKey: 'hc' };
      expect(await store.answers.admitAnswered(second, makeReply(second), 3600, t + 5)).toEqual({ kind: 'answered' });
      const third = { ...makeJob({ deviceId: 'd1', id: 'c3', priority: 'normal', arrivalMs: t }), cacheKey: 'hc' };
      expect(await store.queue.admit(third, limits, t + 6)).toEqual({ kind: 'cached', answer });
      // Four publishes counted (two hits, a duplicate, a hit): the fifth is over the quota.
      expect(await store.queue.admit(third, limits, t + 7)).toMatchObject({ kind: 'rate_limited' });
      // A stale entry, or none, is a miss: the job is queued as usual.
      const other = { ...makeJob({ deviceId: 'd2', id: 'c4', priority: 'normal', arrivalMs: t }), cacheKey: 'hc' };
      expect(await store.queue.admit(other, { deviceRpm: 2, queueMax: 10 }, t + 1000)).toEqual({ kind: 'queued' });
      const uncached = { ...makeJob({ deviceId: 'd2', id: 'c5', priority: 'normal', arrivalMs: t }), cacheKey: 'nothing-here' };
      expect(await store.queue.admit(uncached, { deviceRpm: 2, queueMax: 10 }, t + 1)).toEqual({ kind: 'queued' });
    });

    it('takes the coalescing steps of many jobs in one call, in order', async () => {
      const store = await open();
      const t = baseTime();
      await store.answers.cacheSet('m-done', answer, 1000, t);
      expect(await leadOneOf(store, 'm-busy', 'd0/held', t, 5000)).toEqual({ leader: 'd0/held' });
      const leads = await store.answers.lead(
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
      expect(await store.answers.lead([], 5000, t + 2)).toEqual([]);
    });

    it('keeps a cached answer for its ttl, then forgets it', async () => {
      const store = await open();
      const t = baseTime();
      expect(await store.answers.cacheGet('h1', t)).toBeUndefined();
      await store.answers.cacheSet('h1', answer, 1000, t);
      expect(await store.answers.cacheGet('h1', t + 999)).toEqual(answer);
      expect(await store.answers.cacheGet('h2', t + 1)).toBeUndefined();
      expect(await store.answers.cacheGet('h1', t + 1000)).toBeUndefined();
    });

    it('records a cache-answered request for idempotency, without queueing it or counting it again', async () => {
      const store = await open();
      const t = baseTime();
      const job = makeJob({ deviceId: 'd1', id: 'c1', priority: 'high', arrivalMs: t });
      const reply = makeReply(job, 'from the cache');
      const limits = { deviceRpm: 2, queueMax: 10 };
      expect(await store.answers.admitAnswered(job, reply, 3600, t)).toEqual({ kind: 'answered' });
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
      expect(await store.queue.admit(job, limits, t + 1)).toEqual({ kind: 'duplicate_done', reply });
      expect(await store.answers.admitAnswered(job, reply, 3600, t + 2)).toEqual({ kind: 'duplicate_done', reply });
      const other = makeJob({ deviceId: 'd1', id: 'c2', priority: 'high', arrivalMs: t });
      expect(await store.queue.admit(other, limits, t + 3)).toEqual({ kind: 'queued' });
      const third = makeJob({ deviceId: 'd1', id: 'c3', priority: 'high', arrivalMs: t });
      expect(await store.queue.admit(third, limits, t + 4)).toMatchObject({ kind: 'rate_limited' }); // a duplicate and a job counted
      expect(await store.answers.admitAnswered(third, makeReply(third), 3600, t + 4)).toEqual({ kind: 'answered' });
      const pending = makeJob({ deviceId: 'd1', id: 'c2', priority: 'high', arrivalMs: t });
      expect(await store.answers.admitAnswered(pending, makeReply(pending), 3600, t + 5)).toEqual({ kind: 'duplicate_pending' });
    });

    it('lets one job lead a cache key until it unleads or its lease runs out', async () => {
      const store = await open();
      const t = baseTime();
      expect(await leadOneOf(store, 'h', 'd1/a', t, 5000)).toEqual({ leader: 'd1/a' });
      expect(await leadOneOf(store, 'h', 'd2/b', t + 1, 5000)).toEqual({ leader: 'd1/a' });
      expect(await leadOneOf(store, 'h', 'd1/a', t + 2, 5000)).toEqual({ leader: 'd1/a' }); // the leader again: renewed
      expect(await leadOneOf(store, 'other', 'd2/b', t + 2, 5000)).toEqual({ leader: 'd2/b' });
      await store.answers.unlead('h', 'd2/b'); // not the leader: no effect
      expect(await leadOneOf(store, 'h', 'd2/b', t + 3, 5000)).toEqual({ leader: 'd1/a' });
      await store.answers.unlead('h', 'd1/a');
      expect(await leadOneOf(store, 'h', 'd2/b', t + 4, 5000)).toEqual({ leader: 'd2/b' });
      expect(await leadOneOf(store, 'h', 'd3/c', t + 4 + 5000, 5000)).toEqual({ leader: 'd3/c' }); // d2/b's lease ran out
      // Once the answer is cached, whoever asks gets it instead of a leader.
      await store.answers.cacheSet('h', answer, 1000, t + 9000);
      expect(await leadOneOf(store, 'h', 'd4/d', t + 9001, 5000)).toEqual({ answer });
      expect(await leadOneOf(store, 'h', 'd4/d', t + 10_005, 5000)).toEqual({ leader: 'd4/d' }); // answer and d3/c's lease gone
    });

    it('records the cache entry, ends the flight and adds usage with the completion, in one step', async () => {
      const store = await open();
      const t = Math.floor(Date.now() / 3_600_000) * 3_600_000 + 1000;
      const limits = { deviceRpm: 10, queueMax: 10 };
      const job = makeJob({ deviceId: 'd1', id: 'lead', priority: 'normal', arrivalMs: t });
      expect(await store.queue.admit(job, limits, t)).toEqual({ kind: 'queued' });
      const { jobs } = await store.queue.claim(claimOpts({ owner: 'me' }), t + 1);
      const held = jobs[0] as ClaimedJob;
      expect(await leadOneOf(store, 'hk', held.key, t + 2, 5000)).toEqual({ leader: held.key });
      expect(await leadOneOf(store, 'hk', 'd2/follower', t + 3, 5000)).toEqual({ leader: held.key });
      const usage = { deviceId: 'd1', model: 'big', priority: 'normal' as Priority, promptTokens: 7, completionTokens: 3, costUsd: 0.25 };

      await store.queue.complete(held, makeReply(held), { ...DONE, cache: { key: 'hk', answer, ttlMs: 1000 }, unlead: 'hk', usage }, t + 4);

      expect(await store.answers.storedReply(held.key, t + 5)).toEqual(makeReply(held));
      expect(await leadOneOf(store, 'hk', 'd2/follower', t + 5, 5000)).toEqual({ answer });
      expect(await store.answers.cacheGet('hk', t + 1003)).toEqual(answer);
      expect(await store.answers.cacheGet('hk', t + 1004)).toBeUndefined();
      // The flight ended too: with the answer gone, the follower leads.
      expect(await leadOneOf(store, 'hk', 'd2/follower', t + 1005, 5000)).toEqual({ leader: 'd2/follower' });
      expect((await store.operations.usage(t, t + 10)).byDevice.d1).toEqual({ requests: 1, promptTokens: 7, completionTokens: 3, costUsd: 0.25 });
    });

    it('ends only its own flight when completing, and books nothing it was not asked to', async () => {
      const store = await open();
      const t = baseTime();
      const limits = { deviceRpm: 10, queueMax: 10 };
      const job = makeJob({ deviceId: 'd1', id: 'late', priority: 'normal', arrivalMs: t });
      await store.queue.admit(job, limits, t);
      const held = (await store.queue.claim(claimOpts({ owner: 'me' }), t + 1)).jobs[0] as ClaimedJob;
      expect(await leadOneOf(store, 'hk2', 'd9/other', t + 2, 5000)).toEqual({ leader: 'd9/other' });

      await store.queue.complete(held, makeReply(held), { ...DONE, unlead: 'hk2' }, t + 3);

      expect(await leadOneOf(store, 'hk2', 'd3/x', t + 4, 5000)).toEqual({ leader: 'd9/other' });
      expect(await store.answers.cacheGet('hk2', t + 4)).toBeUndefined();
      expect((await store.operations.usage(t - 3_600_000, t + 10)).total.requests).toBe(0);
    });

    it('adds usage up by device, model and priority, per hour', async () => {
      const store = await open();
      const t = Math.floor(Date.now() / 3_600_000) * 3_600_000;
      const rec = (deviceId: string, model: string, priority: Priority, p: number, c: number, usd: number) => ({
        deviceId,
        model,
        priority,
        promptTokens: p,
        completionTokens: c,
        costUsd: usd,
      });
      await store.answers.recordUsage(rec('cam-1', 'big', 'critical', 100, 20, 0.5), t + 10);
      await store.answers.recordUsage(rec('cam-1', 'small', 'low', 10, 2, 0.25), t + 20);
      await store.answers.recordUsage(rec('cam-2', 'small', 'low', 1, 1, 0), t + 3_600_000 + 5);
      const both = await store.operations.usage(t, t + 3_600_000 + 10);
      expect(both.total).toEqual({ requests: 3, promptTokens: 111, completionTokens: 23, costUsd: 0.75 });
      expect(both.byDevice['cam-1']).toEqual({ requests: 2, promptTokens: 110, completionTokens: 22, costUsd: 0.75 });
      expect(both.byModel.small).toEqual({ requests: 2, promptTokens: 11, completionTokens: 3, costUsd: 0.25 });
      expect(both.byPriority.critical).toEqual({ requests: 1, promptTokens: 100, completionTokens: 20, costUsd: 0.5 });
      const first = await store.operations.usage(t, t + 3_599_999);
      expect(first.total.requests).toBe(2);
      expect(first.byDevice['cam-2']).toBeUndefined();
      expect(both.byTemplate).toEqual({});
    });

    it('adds up requests rendered from a template by its name too, counted once in the total', async () => {
      const store = await open();
      const t = Math.floor(Date.now() / 3_600_000) * 3_600_000;
      const base = { model: 'm', priority: 'normal' as Priority, costUsd: 0.5 };
      await store.answers.recordUsage({ ...base, deviceId: 'cam-1', template: 'defect-check', promptTokens: 30, completionTokens: 5 }, t + 10);
      await store.answers.recordUsage({ ...base, deviceId: 'cam-2', template: 'defect-check', promptTokens: 20, completionTokens: 5 }, t + 20);
      await store.answers.recordUsage({ ...base, deviceId: 'cam-2', promptTokens: 1, completionTokens: 1 }, t + 30);
      const report = await store.operations.usage(t, t + 100);
      expect(report.byTemplate).toEqual({ 'defect-check': { requests: 2, promptTokens: 50, completionTokens: 10, costUsd: 1 } });
      expect(report.total).toEqual({ requests: 3, promptTokens: 51, completionTokens: 11, costUsd: 1.5 });
    });
  });
}
