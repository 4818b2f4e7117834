// The operator commands' tables: aligned columns, rounded figures, a sentence when empty.
import { describe, expect, it } from 'vitest';
import { budgetsTable, table, usageTable } from '../../bridge/ops/cli/tables.js';

describe('operator tables', () => {
  it('align text left and figures right', () => {
    expect(
      table(
        ['name', 'n'],
        [
          ['a', '5'],
          ['long', '1,234'],
        ],
      ).split('\n'),
    ).toEqual(['name      n', 'a         5', 'long  1,234']);
  });

  it('round tokens and cost', () => {
    const totals = { requests: 3, promptTokens: 1234.4, completionTokens: 10, costUsd: 0.000123456 };
    const text = usageTable({ fromMs: 0, toMs: 3_600_000, total: totals, byDevice: { 'cam-1': totals }, byModel: {}, byPriority: {}, byTemplate: {} });
    expect(text).toContain('usage 1970-01-01 00:00 to 1970-01-01 01:00 UTC');
    expect(text).toMatch(/^cam-1 +3 +1,234 +10 +\$0\.0001$/m);
    expect(text).not.toMatch(/^model/m);
  });

  it('say so when CONFIG_FILE sets no budgets', () => {
    expect(budgetsTable({ timeZone: 'UTC', budgets: [] })).toBe('no budgets: CONFIG_FILE sets none\n');
    const report = {
      timeZone: 'Europe/Berlin',
      budgets: [
        {
          name: 'fleet',
          per: 'fleet',
          period: '2026-12',
          unit: 'usd' as const,
          limit: 20,
          resetAt: '2026-12-31T23:00:00.000Z',
          exemptCritical: false,
          use: [{ subject: '*', used: 5.123, reserved: 0 }],
        },
      ],
    };
    expect(budgetsTable(report)).toMatch(/^fleet +2026-12 +\* +\$5\.12 +\$0 +\$20\.00 +26% +2026-12-31 23:00$/m);
  });
});
