// Budgets (CONFIG_FILE `budgets`): tokens or cost a device, a model, a template or the whole
// fleet may use per day or month, the period starting at midnight in `timeZone`. What a
// request is charged against them, and when each period ends.
import { z } from 'zod';
import { DEVICE_PATTERN, matchesDevice } from './fair-share.js';

const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

const LimitSchema = z
  .strictObject({
    name: z.string().regex(NAME, '1 to 64 characters of A-Za-z0-9_.-'),
    per: z.enum(['device', 'model', 'template', 'fleet']),
    /** per device: the device id or `*` pattern it applies to (default `*`: every device). */
    devices: z.string().regex(DEVICE_PATTERN, 'a device id, or a pattern of A-Za-z0-9_.:- and *').default('*'),
    model: z.string().min(1).optional(),
    template: z.string().min(1).optional(),
    period: z.enum(['day', 'month']),
    tokens: z.number().positive().optional(),
    costUsd: z.number().positive().optional(),
    /** `critical` requests are counted but never refused. */
    exemptCritical: z.boolean().default(false),
  })
  .refine((l) => (l.tokens === undefined) !== (l.costUsd === undefined), 'give one of tokens and costUsd')
  .refine((l) => (l.per === 'model') === (l.model !== undefined), '`model` goes with per "model", and it needs one')
  .refine((l) => (l.per === 'template') === (l.template !== undefined), '`template` goes with per "template", and it needs one');

export const BudgetsSchema = z
  .strictObject({
    timeZone: z
      .string()
      .refine((tz) => validTimeZone(tz), 'an IANA time zone, e.g. Europe/Berlin')
      .default('UTC'),
    limits: z.array(LimitSchema).default([]),
  })
  .refine((b) => new Set(b.limits.map((l) => l.name)).size === b.limits.length, 'budget names must differ')
  .default({ timeZone: 'UTC', limits: [] });

export type Budgets = z.infer<typeof BudgetsSchema>;
export type BudgetLimit = Budgets['limits'][number];

function validTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/** One budget's share of a request: reserved at admission, settled when it ends. */
export interface BudgetCharge {
  /** The budget's name. */
  budget: string;
  /** The period's label (`2026-12-02`, `2026-12`), part of where its use is kept. */
  period: string;
  /** The device for a per-device budget, else `*`. */
  subject: string;
  unit: 'tokens' | 'usd';
  limit: number;
  /** What was reserved. */
  estimate: number;
  /** `critical` and exempted: counted, never refused. */
  exempt: boolean;
  /** When the period ends (the next midnight, or the first of the next month, in the time zone). */
  resetAtMs: number;
}

export interface Chargeable {
  deviceId: string;
  priority: string;
  model: string;
  template?: string | undefined;
  tokens: number;
  costUsd: number;
}

/**
 * The budgets a request counts against, each with its estimate: the device's own budget
 * (its id's, else the first pattern it matches), every budget of its model and template,
 * and the fleet's.
 */
export function chargesFor(budgets: Budgets, request: Chargeable, now: number): BudgetCharge[] {
  const device = budgets.limits.filter((l) => l.per === 'device');
  const own = device.find((l) => l.devices === request.deviceId) ?? device.find((l) => matchesDevice(l.devices, request.deviceId));
  const applies = (l: BudgetLimit): boolean =>
    l === own || l.per === 'fleet' || (l.per === 'model' && l.model === request.model) || (l.per === 'template' && l.template === request.template);
  return budgets.limits.filter(applies).map((l) => {
    const { label, endMs } = periodAt(l.period, budgets.timeZone, now);
    const unit = l.tokens === undefined ? 'usd' : 'tokens';
    return {
      budget: l.name,
      period: label,
      subject: l.per === 'device' ? request.deviceId : '*',
      unit,
      limit: (l.tokens ?? l.costUsd) as number,
      estimate: unit === 'tokens' ? request.tokens : request.costUsd,
      exempt: l.exemptCritical && request.priority === 'critical',
      resetAtMs: endMs,
    };
  });
}

export interface Period {
  readonly label: string;
  readonly startMs: number;
  readonly endMs: number;
}

/** The latest period found per kind and zone: the requests inside it reuse it rather than read the zone's clock. */
const CURRENT = new Map<string, Period>();

/** The period of `now` in `timeZone`: its label and when it ends. */
export function periodAt(period: 'day' | 'month', timeZone: string, now: number): Period {
  const key = `${period}\t${timeZone}`;
  const known = CURRENT.get(key);
  if (known !== undefined && known.startMs <= now && now < known.endMs) return known;
  const found = findPeriod(period, timeZone, now);
  CURRENT.set(key, found);
  return found;
}

function findPeriod(period: 'day' | 'month', timeZone: string, now: number): Period {
  const { year, month, day } = localDate(now, timeZone);
  if (period === 'day') {
    const next = new Date(Date.UTC(year, month - 1, day + 1));
    return {
      label: `${year}-${pad(month)}-${pad(day)}`,
      startMs: midnight(year, month, day, timeZone),
      endMs: midnight(next.getUTCFullYear(), next.getUTCMonth() + 1, next.getUTCDate(), timeZone),
    };
  }
  const next = month === 12 ? { y: year + 1, m: 1 } : { y: year, m: month + 1 };
  return { label: `${year}-${pad(month)}`, startMs: midnight(year, month, 1, timeZone), endMs: midnight(next.y, next.m, 1, timeZone) };
}

const pad = (n: number): string => String(n).padStart(2, '0');

function localDate(at: number, timeZone: string): { year: number; month: number; day: number } {
  const parts = dateParts(at, timeZone);
  return { year: parts.year, month: parts.month, day: parts.day };
}

/** Built once per zone: a formatter costs far more to make than to use, and every budgeted request uses one. */
const FORMATS = new Map<string, Intl.DateTimeFormat>();

function dateParts(at: number, timeZone: string): Record<'year' | 'month' | 'day' | 'hour' | 'minute' | 'second', number> {
  let format = FORMATS.get(timeZone);
  if (!format) {
    const numeric = 'numeric' as const;
    format = new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', year: numeric, month: numeric, day: numeric, hour: numeric, minute: numeric, second: numeric });
    FORMATS.set(timeZone, format);
  }
  const out: Record<string, number> = {};
  for (const p of format.formatToParts(new Date(at))) if (p.type !== 'literal') out[p.type] = Number(p.value);
  return out as Record<'year' | 'month' | 'day' | 'hour' | 'minute' | 'second', number>;
}

/** How far `timeZone`'s clock is ahead of UTC at `at`, in ms. */
function offsetAt(at: number, timeZone: string): number {
  const p = dateParts(at, timeZone);
  return Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second) - Math.floor(at / 1000) * 1000;
}

/** The instant of 00:00 on that local date in `timeZone` (its offset looked up twice, for days a DST change starts or ends). */
function midnight(year: number, month: number, day: number, timeZone: string): number {
  const wall = Date.UTC(year, month - 1, day);
  const first = wall - offsetAt(wall, timeZone);
  return wall - offsetAt(first, timeZone);
}
