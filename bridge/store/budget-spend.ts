// What budgets have used and reserved in their current periods: one record per budget and
// period, a used and a reserved amount per subject (a device, or `*`). In memory for one
// instance; in Redis a hash per budget and period (spend:{budget}:{period}, fields
// subject TAB u and subject TAB r), kept until a week after its period ends.
import type { Redis } from 'ioredis';
import type { BudgetCharge } from '../model/budget-charge.js';
import type { LuaArg } from './lua-library.js';

export interface BudgetUse {
  budget: string;
  period: string;
  subject: string;
  used: number;
  reserved: number;
}

export interface BudgetPeriod {
  budget: string;
  period: string;
}

/** How long a period's record outlives it, for reports. */
const KEEP_MS = 7 * 24 * 3600 * 1000;

const recordOf = (c: BudgetPeriod): string => `${c.budget}:${c.period}`;

/** A request's reservations ended with what it used: its tokens or its cost, none without usage (it failed). */
export function settlementOf(
  charges: BudgetCharge[],
  usage: { promptTokens: number; completionTokens: number; costUsd: number } | undefined,
): Array<{ charge: BudgetCharge; used: number }> {
  return charges.map((charge) => ({
    charge,
    used: usage === undefined ? 0 : charge.unit === 'tokens' ? usage.promptTokens + usage.completionTokens : usage.costUsd,
  }));
}

/** Sums are rounded to the micro-unit, so float dust never reads as spend. */
const tidy = (n: number): number => Math.round(n * 1e6) / 1e6 + 0; // + 0: never -0

export class MemorySpend {
  private readonly records = new Map<string, { until: number; subjects: Map<string, { used: number; reserved: number }> }>();

  /** Reserves every charge, all or none; or the first that refuses, and whether only reservations refused it. */
  reserve(charges: BudgetCharge[], now: number): { charge: BudgetCharge; inFlight: boolean } | undefined {
    for (const [record, until] of [...this.records].map(([k, v]) => [k, v.until] as const)) if (until <= now) this.records.delete(record);
    for (const c of charges) {
      const s = this.records.get(recordOf(c))?.subjects.get(c.subject) ?? { used: 0, reserved: 0 };
      if (!c.exempt && s.used + s.reserved + c.estimate > c.limit) return { charge: c, inFlight: s.used + c.estimate <= c.limit };
    }
    for (const c of charges) this.subject(c).reserved += c.estimate;
    return undefined;
  }

  settle(settled: Array<{ charge: BudgetCharge; used: number }>): void {
    for (const { charge, used } of settled) {
      const s = this.subject(charge);
      s.reserved = tidy(s.reserved - charge.estimate);
      s.used = tidy(s.used + used);
    }
  }

  use(periods: BudgetPeriod[]): BudgetUse[] {
    return periods.flatMap((p) => [...(this.records.get(recordOf(p))?.subjects ?? [])].map(([subject, s]) => ({ ...p, subject, ...s })));
  }

  private subject(c: BudgetCharge): { used: number; reserved: number } {
    let record = this.records.get(recordOf(c));
    if (!record) this.records.set(recordOf(c), (record = { until: c.resetAtMs + KEEP_MS, subjects: new Map() }));
    let s = record.subjects.get(c.subject);
    if (!s) record.subjects.set(c.subject, (s = { used: 0, reserved: 0 }));
    return s;
  }
}

export class RedisSpend {
  constructor(
    private readonly redis: Redis,
    /** `{prefix}:` */
    private readonly base: string,
    private readonly run: (fn: 'budget-settle', keys: string[], args: LuaArg[]) => Promise<unknown>,
  ) {}

  /** The spend keys and arguments that reserve these charges inside admit (lua/includes/spend.lua). */
  reservation(charges: BudgetCharge[]): { keys: string[]; args: LuaArg[] } {
    return {
      keys: charges.map((c) => this.key(c)),
      args: charges.flatMap((c) => [c.subject, c.limit, c.estimate, c.exempt ? '1' : '0', c.resetAtMs + KEEP_MS]),
    };
  }

  async settle(settled: Array<{ charge: BudgetCharge; used: number }>): Promise<void> {
    if (settled.length === 0) return;
    const { keys, args } = this.settlement(settled);
    await this.run('budget-settle', keys, args);
  }

  /** The spend keys and arguments that settle these reservations (lua/includes/spend.lua). */
  settlement(settled: Array<{ charge: BudgetCharge; used: number }>): { keys: string[]; args: LuaArg[] } {
    return {
      keys: settled.map(({ charge }) => this.key(charge)),
      args: settled.flatMap(({ charge, used }) => [charge.subject, charge.estimate, used]),
    };
  }

  async use(periods: BudgetPeriod[]): Promise<BudgetUse[]> {
    const all = await Promise.all(periods.map(async (p) => ({ p, fields: await this.redis.hgetall(this.key(p)) })));
    return all.flatMap(({ p, fields }) => {
      const subjects = new Set(Object.keys(fields).map((f) => f.slice(0, f.lastIndexOf('\t'))));
      return [...subjects].map((subject) => ({
        ...p,
        subject,
        used: tidy(Number(fields[`${subject}\tu`] ?? 0)),
        reserved: tidy(Number(fields[`${subject}\tr`] ?? 0)),
      }));
    });
  }

  private key(p: BudgetPeriod): string {
    return `${this.base}spend:${recordOf(p)}`;
  }
}
