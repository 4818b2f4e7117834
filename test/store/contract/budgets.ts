// Store contract, budgets: admission reserves a request's estimate in every budget it counts
// against (job.budget), all or none, after the quota and the idempotency record; the first
// that would go over its limit refuses it (an exempt one counts but never refuses), saying
// whether only reservations refused it; settling moves the estimate from reserved to what was
// used (0 for a failure); reservations racing each other never take a budget over its limit.
import { describe, expect, it } from 'vitest';
import type { BudgetCharge } from '../../../bridge/model/budget-charge.js';
import type { AdmitLimits, Store } from '../../../bridge/store/port.js';
import type { ClaimedJob } from '../../../bridge/model/job.js';
import { admitAll, baseTime, claimOpts, DONE, LIMITS, makeJob, makeReply, type ContractContext } from './fixtures.js';

const charge = (o: Partial<BudgetCharge> = {}): BudgetCharge => ({
  budget: 'daily',
  period: '2026-12-02',
  subject: 'cam-1',
  unit: 'tokens',
  limit: 100,
  estimate: 30,
  exempt: false,
  resetAtMs: baseTime() + 86_400_000,
  ...o,
});

let admitted = 0;
/** A new request of cam-1 carrying `charges`, admitted: undefined when queued, else the refusing charge. */
async function reserve(store: Store, charges: BudgetCharge[], now: number, deviceId = 'cam-1'): Promise<BudgetCharge | undefined> {
  const job = { ...makeJob({ deviceId, id: `b-${(admitted += 1)}`, priority: 'normal', arrivalMs: now }), budget: charges };
  const result = await store.queue.admit(job, LIMITS, now);
  if (result.kind === 'queued') return undefined;
  if (result.kind !== 'budget_exceeded') throw new Error(`expected queued or budget_exceeded, got ${result.kind}`);
  return result.charge;
}

export function budgetsContract({ open }: ContractContext): void {
  describe('budgets', () => {
    it('reserves until the limit, then refuses with the budget that would go over', async () => {
      const store = await open();
      const now = baseTime();
      for (let i = 0; i < 3; i += 1) expect(await reserve(store, [charge()], now)).toBeUndefined();
      const fleet = charge({ budget: 'fleet', subject: '*', limit: 1000 });
      expect(await reserve(store, [fleet, charge()], now)).toMatchObject({ budget: 'daily', subject: 'cam-1' });
      // All or none: the fleet budget took nothing from the refused request.
      expect(await store.operations.budgetUse([{ budget: 'fleet', period: '2026-12-02' }])).toEqual([]);
      // Another device, and an exempt request, are not refused.
      expect(await reserve(store, [charge({ subject: 'cam-2' })], now, 'cam-2')).toBeUndefined();
      expect(await reserve(store, [charge({ exempt: true })], now)).toBeUndefined();
      const use = await store.operations.budgetUse([{ budget: 'daily', period: '2026-12-02' }]);
      expect(use.sort((a, b) => a.subject.localeCompare(b.subject))).toEqual([
        { budget: 'daily', period: '2026-12-02', subject: 'cam-1', used: 0, reserved: 120 },
        { budget: 'daily', period: '2026-12-02', subject: 'cam-2', used: 0, reserved: 30 },
      ]);
    });

    it('settles a reservation with what was used, and releases a failed one', async () => {
      const store = await open();
      const now = baseTime();
      const c = charge({ unit: 'usd', limit: 1, estimate: 0.4 });
      expect(await reserve(store, [c], now)).toBeUndefined();
      expect(await reserve(store, [c], now)).toBeUndefined();
      expect(await reserve(store, [c], now)).toEqual(c); // 0.8 reserved + 0.4 > 1
      await store.limits.settleBudgets([{ charge: c, used: 0.05 }]); // answered, cheaper than estimated
      await store.limits.settleBudgets([{ charge: c, used: 0 }]); // failed: released
      expect(await store.operations.budgetUse([{ budget: 'daily', period: '2026-12-02' }])).toEqual([
        { budget: 'daily', period: '2026-12-02', subject: 'cam-1', used: 0.05, reserved: 0 },
      ]);
      expect(await reserve(store, [c], now)).toBeUndefined();
    });

    it('settles a job once, by its first answer: a stale holder answering first, the new holder, a retried completion', async () => {
      const store = await open();
      const t = baseTime();
      const c = charge({ budget: 'once', estimate: 30 });
      await admitAll(store, [{ ...makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'normal', arrivalMs: t }), budget: [c] }]);
      const first = (await store.queue.claim(claimOpts({ leaseMs: 1000, owner: 'worker-1' }), t)).jobs[0] as ClaimedJob;
      await store.queue.reap(3, t + 2000); // worker-1's lease ran out while it still worked
      const second = (await store.queue.claim(claimOpts({ leaseMs: 1000, owner: 'worker-2' }), t + 2000)).jobs[0] as ClaimedJob;
      expect(second.key).toBe(first.key);
      const usage = { deviceId: 'cam-1', model: 'm', priority: 'normal' as const, promptTokens: 7, completionTokens: 5, costUsd: 0 };
      const reply = makeReply(first);
      await store.queue.complete(first, reply, { ...DONE, usage }, t + 2100);
      await store.queue.complete(second, reply, { ...DONE, usage }, t + 2200);
      await store.queue.complete(second, reply, { ...DONE, usage }, t + 2300);
      expect(await store.operations.budgetUse([{ budget: 'once', period: '2026-12-02' }])).toEqual([
        { budget: 'once', period: '2026-12-02', subject: 'cam-1', used: 12, reserved: 0 },
      ]);
    });

    it('answers duplicates of a queued or answered job from its record, never touching budgets', async () => {
      const store = await open();
      const t = baseTime();
      const c = charge({ budget: 'dup', limit: 40, estimate: 30 });
      const job = { ...makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'normal', arrivalMs: t }), budget: [c] };
      await admitAll(store, [job]);
      // The budget has room for no second estimate: duplicates are answered all the same.
      for (let i = 1; i <= 5; i += 1) expect(await store.queue.admit(job, LIMITS, t + i)).toEqual({ kind: 'duplicate_pending' });
      const held = (await store.queue.claim(claimOpts(), t + 10)).jobs[0] as ClaimedJob;
      const reply = makeReply(held);
      const usage = { deviceId: 'cam-1', model: 'm', priority: 'normal' as const, promptTokens: 20, completionTokens: 15, costUsd: 0 };
      await store.queue.complete(held, reply, { ...DONE, usage }, t + 20);
      // 35 of 40 used: a new request would be refused, a repeat of the answered one is not.
      for (let i = 1; i <= 5; i += 1) expect(await store.queue.admit(job, LIMITS, t + 20 + i)).toEqual({ kind: 'duplicate_done', reply });
      expect(await store.operations.budgetUse([{ budget: 'dup', period: '2026-12-02' }])).toEqual([
        { budget: 'dup', period: '2026-12-02', subject: 'cam-1', used: 35, reserved: 0 },
      ]);
    });

    it("says whether only other requests' reservations refused a request, or what the budget used", async () => {
      const store = await open();
      const t = baseTime();
      const c = charge({ budget: 'flight', limit: 100, estimate: 60 });
      const first = { ...makeJob({ deviceId: 'cam-1', id: 'f-1', priority: 'normal', arrivalMs: t }), budget: [c] };
      await admitAll(store, [first]);
      const second = { ...makeJob({ deviceId: 'cam-1', id: 'f-2', priority: 'normal', arrivalMs: t + 1 }), budget: [c] };
      expect(await store.queue.admit(second, LIMITS, t + 1)).toEqual({ kind: 'budget_exceeded', charge: c, inFlight: true });
      const held = (await store.queue.claim(claimOpts(), t + 2)).jobs[0] as ClaimedJob;
      const usage = { deviceId: 'cam-1', model: 'm', priority: 'normal' as const, promptTokens: 30, completionTokens: 20, costUsd: 0 };
      await store.queue.complete(held, makeReply(held), { ...DONE, usage }, t + 3);
      // 50 used + 60 > 100, with nothing reserved: the budget itself has no room.
      expect(await store.queue.admit(second, LIMITS, t + 4)).toEqual({ kind: 'budget_exceeded', charge: c, inFlight: false });
      expect(await store.answers.storedReply(second.key, t + 5)).toBeUndefined(); // no record: a retry is a new admission
    });

    it("reserves nothing for an admission refused by the quota, the queue's room or a cached answer", async () => {
      const store = await open();
      const t = baseTime();
      const c = charge({ budget: 'none', limit: 1000, estimate: 10 });
      const withBudget = (id: string, deviceId = 'cam-1') => ({ ...makeJob({ deviceId, id, priority: 'normal', arrivalMs: t }), budget: [c] });
      const limits: AdmitLimits = { deviceRpm: 1, queueMax: 1 };
      expect(await store.queue.admit(withBudget('a'), limits, t)).toEqual({ kind: 'queued' });
      expect((await store.queue.admit(withBudget('b'), limits, t + 1)).kind).toBe('rate_limited');
      expect(await store.queue.admit(withBudget('c', 'cam-2'), limits, t + 2)).toEqual({ kind: 'queue_full' });
      await store.answers.cacheSet('hit', { model: 'm', content: 'x', finish_reason: 'stop' }, 1000, t);
      expect((await store.queue.admit({ ...withBudget('d', 'cam-3'), cacheKey: 'hit' }, limits, t + 3)).kind).toBe('cached');
      expect(await store.operations.budgetUse([{ budget: 'none', period: '2026-12-02' }])).toEqual([
        { budget: 'none', period: '2026-12-02', subject: 'cam-1', used: 0, reserved: 10 },
      ]);
    });

    it('never lets reservations racing each other take a budget over its limit', async () => {
      const store = await open();
      const now = baseTime();
      const results = await Promise.all(Array.from({ length: 20 }, () => reserve(store, [charge({ budget: 'race', estimate: 10 })], now)));
      expect(results.filter((r) => r === undefined)).toHaveLength(10);
    });
  });
}
