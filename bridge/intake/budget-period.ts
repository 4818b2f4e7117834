// Budget periods: a day or a month starting at midnight in the budgets' time zone. Intake
// labels a request's charges with one; the budgets report reads what each has used.

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
    format = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: numeric,
      month: numeric,
      day: numeric,
      hour: numeric,
      minute: numeric,
      second: numeric,
    });
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
