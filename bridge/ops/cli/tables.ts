// The operator commands' tables: aligned columns and rounded figures for a terminal
// (`--json` prints the raw report instead).
import type { DeadLetter } from '../../store/port.js';
import type { UsageReport, UsageTotals } from '../../store/usage-types.js';
import type { BudgetReport } from '../budgets-report.js';

/** Left-aligned text, right-aligned figures (a column whose cells all look like numbers). */
export function table(header: string[], rows: string[][]): string {
  const all = [header, ...rows];
  const widths = header.map((_, c) => Math.max(...all.map((row) => (row[c] ?? '').length)));
  const numeric = header.map((_, c) => rows.length > 0 && rows.every((row) => /^[-$0-9.,%]+$/.test(row[c] ?? '')));
  const line = (row: string[]): string =>
    row
      .map((cell, c) => (numeric[c] ? cell.padStart(widths[c] as number) : cell.padEnd(widths[c] as number)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

const count = (n: number): string => Math.round(n).toLocaleString('en-US');
const usd = (n: number): string => (n === 0 ? '$0' : `$${n < 1 ? n.toFixed(4) : n.toFixed(2)}`);

function totalsRows(by: Record<string, UsageTotals>): string[][] {
  return Object.entries(by)
    .sort(([, a], [, b]) => b.costUsd - a.costUsd || b.promptTokens + b.completionTokens - (a.promptTokens + a.completionTokens))
    .map(([name, t]) => [name, count(t.requests), count(t.promptTokens), count(t.completionTokens), usd(t.costUsd)]);
}

export function usageTable(report: UsageReport): string {
  const from = new Date(report.fromMs).toISOString().slice(0, 16).replace('T', ' ');
  const to = new Date(report.toMs).toISOString().slice(0, 16).replace('T', ' ');
  const sections: Array<[string, Record<string, UsageTotals>]> = [
    ['device', report.byDevice],
    ['model', report.byModel],
    ['priority', report.byPriority],
    ['template', report.byTemplate],
  ];
  const parts = [`usage ${from} to ${to} UTC`, table(['', 'requests', 'prompt tokens', 'completion tokens', 'cost'], totalsRows({ total: report.total }))];
  for (const [name, by] of sections) {
    if (Object.keys(by).length > 0) parts.push(table([name, 'requests', 'prompt tokens', 'completion tokens', 'cost'], totalsRows(by)));
  }
  return `${parts.join('\n\n')}\n`;
}

export function budgetsTable(report: BudgetReport): string {
  if (report.budgets.length === 0) return 'no budgets: CONFIG_FILE sets none\n';
  const rows = report.budgets.flatMap((b) => {
    const amount = (n: number): string => (b.unit === 'usd' ? usd(n) : count(n));
    const uses = b.use.length > 0 ? b.use : [{ subject: b.per === 'device' ? '-' : '*', used: 0, reserved: 0 }];
    return uses.map((u) => [
      b.name,
      b.period,
      u.subject,
      amount(u.used),
      amount(u.reserved),
      amount(b.limit),
      `${Math.round(((u.used + u.reserved) / b.limit) * 100)}%`,
      b.resetAt.slice(0, 16).replace('T', ' '),
    ]);
  });
  return `${table(['budget', 'period', 'subject', 'used', 'reserved', 'limit', 'use', `resets (UTC)`], rows)}\n(periods in ${report.timeZone})\n`;
}

export function deadLettersTable(letters: DeadLetter[]): string {
  const rows = letters.map(({ job, reply, atMs }) => [
    job.key,
    job.priority,
    new Date(atMs).toISOString().slice(0, 19).replace('T', ' '),
    reply.ok ? '' : reply.error.code,
    String(job.attempts),
    reply.ok ? '' : reply.error.message.slice(0, 60),
  ]);
  return table(['key', 'priority', 'at (UTC)', 'error', 'attempts', 'message'], rows);
}
