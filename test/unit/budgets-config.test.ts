// Budgets from CONFIG_FILE: the period of an instant in the configured time zone (a day
// begins at local midnight, DST days included; a month on the 1st), which budgets a request
// counts against, and bad entries refused by name.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BudgetsSchema } from '../../bridge/config/budgets.js';
import { chargesFor } from '../../bridge/intake/budgets.js';
import { periodAt } from '../../bridge/intake/budget-period.js';
import { loadConfig } from '../../bridge/config/config.js';

const at = (iso: string): number => Date.parse(iso);
const iso = (ms: number): string => new Date(ms).toISOString();

describe('budget periods', () => {
  it('starts a day at local midnight, on the days DST begins and ends too', () => {
    // Berlin: 2026-03-29 has 23 hours (clocks go 02:00 → 03:00), 2026-10-25 has 25.
    const spring = periodAt('day', 'Europe/Berlin', at('2026-03-29T12:00:00Z'));
    expect(spring).toMatchObject({ label: '2026-03-29' });
    expect([iso(spring.startMs), iso(spring.endMs)]).toEqual(['2026-03-28T23:00:00.000Z', '2026-03-29T22:00:00.000Z']);
    const autumn = periodAt('day', 'Europe/Berlin', at('2026-10-25T12:00:00Z'));
    expect([iso(autumn.startMs), iso(autumn.endMs)]).toEqual(['2026-10-24T22:00:00.000Z', '2026-10-25T23:00:00.000Z']);
    // A minute before and after local midnight fall in different days.
    expect(periodAt('day', 'Europe/Berlin', at('2026-12-01T22:59:00Z')).label).toBe('2026-12-01');
    expect(periodAt('day', 'Europe/Berlin', at('2026-12-01T23:01:00Z')).label).toBe('2026-12-02');
    expect(periodAt('day', 'America/New_York', at('2026-11-01T03:59:00Z')).label).toBe('2026-10-31');
  });

  it('starts a month on the 1st at local midnight, and ends it at the next', () => {
    const december = periodAt('month', 'Asia/Tokyo', at('2026-12-31T16:00:00Z')); // Jan 1st 01:00 in Tokyo
    expect(december.label).toBe('2027-01');
    expect([iso(december.startMs), iso(december.endMs)]).toEqual(['2026-12-31T15:00:00.000Z', '2027-01-31T15:00:00.000Z']);
    expect(periodAt('month', 'UTC', at('2026-02-10T00:00:00Z')).endMs).toBe(at('2026-03-01T00:00:00Z'));
  });

  it('reuses the period it found while the clock stays inside it, and finds the next at its very end, either way in time', () => {
    const day = periodAt('day', 'America/New_York', at('2026-06-10T12:00:00Z'));
    expect(periodAt('day', 'America/New_York', day.endMs - 1)).toBe(day);
    expect(periodAt('day', 'America/New_York', day.endMs).label).toBe('2026-06-11');
    expect(periodAt('day', 'America/New_York', day.startMs - 1).label).toBe('2026-06-09');
    expect(periodAt('day', 'America/New_York', day.startMs)).toEqual(day);
    expect(periodAt('day', 'Asia/Tokyo', day.startMs).label).toBe('2026-06-10'); // another zone, its own period
  });
});

describe('budget charges', () => {
  const budgets = BudgetsSchema.parse({
    timeZone: 'UTC',
    limits: [
      { name: 'devices', per: 'device', period: 'day', tokens: 1000, exemptCritical: true },
      { name: 'cam7', per: 'device', devices: 'cam-7', period: 'day', tokens: 5000 },
      { name: 'big-model', per: 'model', model: 'gpt-4o', period: 'month', costUsd: 10 },
      { name: 'defects', per: 'template', template: 'defect-check', period: 'day', tokens: 9000 },
      { name: 'fleet', per: 'fleet', period: 'month', costUsd: 100 },
    ],
  });
  const now = at('2026-12-02T10:00:00Z');

  it("counts a request against its device's own budget, its model's, its template's and the fleet's", () => {
    const charges = chargesFor(budgets, { deviceId: 'cam-7', priority: 'normal', model: 'gpt-4o', template: 'defect-check', tokens: 300, costUsd: 0.01 }, now);
    expect(charges.map((c) => [c.budget, c.subject, c.unit, c.estimate])).toEqual([
      ['cam7', 'cam-7', 'tokens', 300],
      ['big-model', '*', 'usd', 0.01],
      ['defects', '*', 'tokens', 300],
      ['fleet', '*', 'usd', 0.01],
    ]);
    expect(charges[0]?.resetAtMs).toBe(at('2026-12-03T00:00:00Z'));
  });

  it('applies the default device budget to other devices, exempting critical where asked', () => {
    const [device] = chargesFor(budgets, { deviceId: 'cam-8', priority: 'critical', model: 'mini', tokens: 10, costUsd: 0 }, now);
    expect(device).toMatchObject({ budget: 'devices', subject: 'cam-8', exempt: true, period: '2026-12-02' });
  });
});

describe('budgets in CONFIG_FILE', () => {
  const dir = mkdtempSync(join(tmpdir(), 'budgets-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const load = (budgets: unknown): unknown => {
    const path = join(dir, `b${Math.random().toString(36).slice(2)}.json`);
    writeFileSync(path, JSON.stringify({ budgets }));
    return loadConfig({ CONFIG_FILE: path });
  };

  it('refuses a bad time zone, both or neither unit, a model budget without a model, and twice a name', () => {
    expect(() => load({ timeZone: 'Mars/Olympus' })).toThrow(/budgets\.timeZone: an IANA time zone/);
    expect(() => load({ limits: [{ name: 'x', per: 'fleet', period: 'day', tokens: 1, costUsd: 1 }] })).toThrow(/give one of tokens and costUsd/);
    expect(() => load({ limits: [{ name: 'x', per: 'model', period: 'day', tokens: 1 }] })).toThrow(/`model` goes with per "model"/);
    const twice = { name: 'x', per: 'fleet', period: 'day', tokens: 1 };
    expect(() => load({ limits: [twice, twice] })).toThrow(/budget names must differ/);
  });
});
