// The one result format of every engine: the threaded engine's step summary made the same
// report as the mqtt.js fleet's (stats.ts FleetReport, also the `--json` output), and the
// table and hint lines printed for it.
import { PRIORITIES, type Priority } from '../contract/index.js';
import { answeredOf, emptyDiagnosis, hints, type Diagnosis } from './diagnosis.js';
import type { StepSummary } from './load.js';
import { formatMix, LATE_AFTER_DEADLINE_MS, type FleetReport, type ReplyCounts, type ReportConfig, type Row } from './stats.js';

/** A --workers step as the shared report; its measured time is the sending window. */
export function reportOfStep(step: StepSummary, config: ReportConfig): FleetReport {
  const rowOf = (counts: ReplyCounts, latencyMs: Row['latencyMs'], expired: number, late: number): Row => {
    const errors = Object.fromEntries(Object.entries(counts.errors).sort(([a], [b]) => a.localeCompare(b)));
    const answered = counts.ok + Object.values(errors).reduce((a, b) => a + b, 0);
    const achievedRate = step.sendS > 0 ? Math.round((answered / step.sendS) * 100) / 100 : 0;
    return { sent: counts.sent, ok: counts.ok, errors, lost: counts.lost, expired, late, latencyMs, achievedRate };
  };
  const byPriority = {} as Record<Priority, Row>;
  for (const p of PRIORITIES) {
    const s = step.byPriority[p];
    byPriority[p] = rowOf(s, s.latencyMs, s.expired, s.late);
  }
  const expired = PRIORITIES.reduce((n, p) => n + step.byPriority[p].expired, 0);
  const overall = rowOf(step, step.ok + errorTotal(step.errors) > 0 ? step.latencyMs : null, expired, step.late);
  const diagnosis: Diagnosis = {
    ...emptyDiagnosis(true),
    bridges: step.bridges,
    statusRefused: step.statusRefused,
    disconnects: step.disconnects,
    ...(step.firstDisconnect === undefined ? {} : { firstDisconnect: step.firstDisconnect }),
  };
  return {
    overall,
    byPriority,
    durationS: Math.round(step.sendS * 1000) / 1000,
    config,
    diagnosis,
    hints: [...hints(diagnosis, answeredOf(overall.ok, overall.errors)), ...generatorHint(step)],
  };
}

/** A generator this far behind its schedule was itself the limit, not the system under test. */
function generatorHint(step: StepSummary): string[] {
  if (step.generatorBehind < Math.max(10, step.rate / 10)) return [];
  return [
    `the worker threads fell up to ${step.generatorBehind} requests behind their schedule: the generator, not the bridge, was the limit (more --workers, or another machine)`,
  ];
}

function errorTotal(errors: Record<string, number>): number {
  return Object.values(errors).reduce((a, b) => a + b, 0);
}

/** The table, then one line per hint. */
export function formatReport(report: FleetReport): string {
  return [formatTable(report), ...report.hints.map((hint) => `hint: ${hint}`)].join('\n');
}

function formatErrors(errors: Record<string, number>): string {
  const entries = Object.entries(errors);
  return entries.length === 0 ? '-' : entries.map(([code, n]) => `${code}=${n}`).join(',');
}

function formatMs(v: number | undefined): string {
  return v === undefined ? '-' : v >= 100 ? String(Math.round(v)) : v.toFixed(1);
}

/** A fixed-width text table: one line per priority, then the overall line; with a ttl, its expired and late columns. */
export function formatTable(report: FleetReport): string {
  const withTtl = report.config.ttlMs !== undefined;
  const withStream = report.config.stream === true;
  const header = ['priority', 'sent', 'ok', 'errors', 'lost', ...(withTtl ? ['expired', 'late'] : []), 'p50 ms', 'p95 ms', 'p99 ms', 'max ms'];
  header.push(...(withStream ? ['chunk p50', 'chunk p99'] : []), 'rate/s');
  const toCells = (name: string, row: Row): string[] => [
    name,
    String(row.sent),
    String(row.ok),
    formatErrors(row.errors),
    String(row.lost),
    ...(withTtl ? [String(row.expired), String(row.late)] : []),
    formatMs(row.latencyMs?.p50),
    formatMs(row.latencyMs?.p95),
    formatMs(row.latencyMs?.p99),
    formatMs(row.latencyMs?.max),
    ...(withStream ? [formatMs(row.firstChunkMs?.p50), formatMs(row.firstChunkMs?.p99)] : []),
    row.achievedRate.toFixed(1),
  ];
  const rows = [header, ...PRIORITIES.map((p) => toCells(p, report.byPriority[p])), toCells('overall', report.overall)];
  const widths = header.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  // Names and error lists read best left-aligned; numbers line up on the right.
  const leftAligned = new Set([0, 3]);
  const render = (cells: string[]): string =>
    cells
      .map((c, i) => (leftAligned.has(i) ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  const rule = widths.map((w) => '-'.repeat(w)).join('  ');
  const c = report.config;
  const ttl =
    (withTtl ? `, ttl_ms ${c.ttlMs} (late: over ${LATE_AFTER_DEADLINE_MS} ms past it)` : '') + (withStream ? ', streamed (chunk: publish to first text)' : '');
  const engine =
    (c.workers > 0 ? `, ${c.workers} worker thread${c.workers === 1 ? '' : 's'}` : c.mqtt5 === true ? ', MQTT 5' : '') +
    (c.client === true ? ', edge-ai-bridge/client' : '');
  const title =
    `device-sim: ${c.devices} devices${engine}, ${c.rate} req/s for ${c.durationS} s, qos ${c.qos}, ` +
    `mix ${formatMix(c.mix)}${ttl}, ${c.url} — measured ${report.durationS.toFixed(1)} s`;
  const lines = [title, render(header), rule, ...rows.slice(1, -1).map(render), rule, render(rows[rows.length - 1] ?? [])];
  return lines.join('\n');
}
