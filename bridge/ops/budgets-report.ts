// What the budgets have used in their current periods: the operator API's /v1/budgets and
// `edge-ai-bridge budgets` print it.
import type { Budgets } from '../config/budgets.js';
import { periodAt } from '../intake/budget-period.js';
import type { Operations } from '../store/port.js';

export interface BudgetReport {
  timeZone: string;
  budgets: Array<{
    name: string;
    per: string;
    period: string;
    unit: 'tokens' | 'usd';
    limit: number;
    resetAt: string;
    exemptCritical: boolean;
    /** Per device for a per-device budget (the most used first), else one entry `*`. */
    use: Array<{ subject: string; used: number; reserved: number }>;
  }>;
}

export async function budgetReport(budgets: Budgets, store: Pick<Operations, 'budgetUse'>, now: number): Promise<BudgetReport> {
  const periods = budgets.limits.map((l) => ({ limit: l, ...periodAt(l.period, budgets.timeZone, now) }));
  const use = await store.budgetUse(periods.map((p) => ({ budget: p.limit.name, period: p.label })));
  return {
    timeZone: budgets.timeZone,
    budgets: periods.map(({ limit, label, endMs }) => ({
      name: limit.name,
      per: limit.per,
      period: label,
      unit: limit.tokens === undefined ? 'usd' : 'tokens',
      limit: (limit.tokens ?? limit.costUsd) as number,
      resetAt: new Date(endMs).toISOString(),
      exemptCritical: limit.exemptCritical,
      use: use
        .filter((u) => u.budget === limit.name && u.period === label)
        .map(({ subject, used, reserved }) => ({ subject, used, reserved }))
        .sort((a, b) => b.used + b.reserved - (a.used + a.reserved)),
    })),
  };
}
