// Store contract, budgets: a request's estimate is reserved in every budget it counts
// against, all or none; the first that would go over its limit refuses it (an exempt one
// counts but never refuses); settling moves the estimate from reserved to what was used (0 for
// a failure); reservations racing each other never take a budget over its limit.
import { describe, expect, it } from 'vitest';
import type { BudgetCharge } from '../../../bridge/config/budgets.js';
import type { ClaimedJob } from '../../../bridge/store/types.js';
import { admitAll, baseTime, claimOpts, DONE, makeJob, makeReply, type ContractContext } from './fixtures.js';

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

export function budgetsContract({ open }: ContractContext): void {
  describe('budgets', () => {
    it('reserves until the limit, then refuses with the budget that would go over', async () => {
      const store = await open();
      const now = baseTime();
      for (let i = 0; i < 3; i += 1) expect(await store.reserveBudgets([charge()], now)).toBeUndefined();
      const fleet = charge({ budget: 'fleet', subject: '*', limit: 1000 });
      expect(await store.reserveBudgets([fleet, charge()], now)).toMatchObject({ budget: 'daily', subject: 'cam-1' });
      // All or none: the fleet budget took nothing from the refused request.
      expect(await store.budgetUse([{ budget: 'fleet', period: '2026-12-02' }])).toEqual([]);
      // Another device, and an exempt request, are not refused.
      expect(await store.reserveBudgets([charge({ subject: 'cam-2' })], now)).toBeUndefined();
      expect(await store.reserveBudgets([charge({ exempt: true })], now)).toBeUndefined();
      const use = await store.budgetUse([{ budget: 'daily', period: '2026-12-02' }]);
      expect(use.sort((a, b) => a.subject.localeCompare(b.subject))).toEqual([
        { budget: 'daily', period: '2026-12-02', subject: 'cam-1', used: 0, reserved: 120 },
        { budget: 'daily', period: '2026-12-02', subject: 'cam-2', used: 0, reserved: 30 },
      ]);
    });

    it('settles a reservation with what was used, and releases a failed one', async () => {
      const store = await open();
      const now = baseTime();
      const c = charge({ unit: 'usd', limit: 1, estimate: 0.4 });
      expect(await store.reserveBudgets([c], now)).toBeUndefined();
      expect(await store.reserveBudgets([c], now)).toBeUndefined();
      expect(await store.reserveBudgets([c], now)).toEqual(c); // 0.8 reserved + 0.4 > 1
      await store.settleBudgets([{ charge: c, used: 0.05 }]); // answered, cheaper than estimated
      await store.settleBudgets([{ charge: c, used: 0 }]); // failed: released
      expect(await store.budgetUse([{ budget: 'daily', period: '2026-12-02' }])).toEqual([
        { budget: 'daily', period: '2026-12-02', subject: 'cam-1', used: 0.05, reserved: 0 },
      ]);
      expect(await store.reserveBudgets([c], now)).toBeUndefined();
    });

    it('settles a job once, by its first answer: a stale holder answering first, the new holder, a retried completion', async () => {
      const store = await open();
      const t = baseTime();
      const c = charge({ budget: 'once', estimate: 30 });
      expect(await store.reserveBudgets([c], t)).toBeUndefined();
      await admitAll(store, [{ ...makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'normal', arrivalMs: t }), budget: [c] }]);
      const first = (await store.claim(claimOpts({ leaseMs: 1000, owner: 'worker-1' }), t)).jobs[0] as ClaimedJob;
      await store.reap(3, t + 2000); // worker-1's lease ran out while it still worked
      const second = (await store.claim(claimOpts({ leaseMs: 1000, owner: 'worker-2' }), t + 2000)).jobs[0] as ClaimedJob;
      expect(second.key).toBe(first.key);
      const usage = { deviceId: 'cam-1', model: 'm', priority: 'normal' as const, promptTokens: 7, completionTokens: 5, costUsd: 0 };
      const reply = makeReply(first);
      await store.complete(first, reply, { ...DONE, usage }, t + 2100);
      await store.complete(second, reply, { ...DONE, usage }, t + 2200);
      await store.complete(second, reply, { ...DONE, usage }, t + 2300);
      expect(await store.budgetUse([{ budget: 'once', period: '2026-12-02' }])).toEqual([
        { budget: 'once', period: '2026-12-02', subject: 'cam-1', used: 12, reserved: 0 },
      ]);
    });

    it('never lets reservations racing each other take a budget over its limit', async () => {
      const store = await open();
      const now = baseTime();
      const results = await Promise.all(Array.from({ length: 20 }, () => store.reserveBudgets([charge({ budget: 'race', estimate: 10 })], now)));
      expect(results.filter((r) => r === undefined)).toHaveLength(10);
    });
  });
}
