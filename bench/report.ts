// Renders the benchmark's results document as Markdown: the summary for the terminal and the
// README (formatReport), and the per-step tables kept out of the terminal (formatSteps).

import { LATE_AFTER_DEADLINE_MS } from '../device-sim/stats.js';
import type { BenchResults, CpuShare, Latency, OverloadResult, StepResult, SystemResult } from './results.js';

const DASH = '—';

type Align = 'l' | 'r';

/** Integer with a space between thousands groups, `8 000`; `—` for a non-finite value. */
export function formatInt(n: number): string {
  if (!Number.isFinite(n)) return DASH;
  return groupThousands(Math.round(n).toString());
}

/** Fixed decimals, thousands grouped; `—` for a non-finite value. */
function formatFixed(n: number, digits: number): string {
  if (!Number.isFinite(n)) return DASH;
  // Avoids "-0.0" for values that round to zero.
  const rounded = Number(n.toFixed(digits));
  return groupThousands((rounded === 0 ? 0 : rounded).toFixed(digits));
}

function groupThousands(s: string): string {
  const [whole = '', fraction] = s.split('.');
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ' ');
  return fraction === undefined ? grouped : `${grouped}.${fraction}`;
}

/** Shows a whole number as such and anything else with one decimal (durations, GB). */
export function formatShort(n: number): string {
  return Number.isInteger(n) ? formatInt(n) : formatFixed(n, 1);
}

function formatMs(n: number | undefined): string {
  return n === undefined ? DASH : formatFixed(n, 1);
}

/** `bridge 0.95 · generator 0.62`, in the object's own key order. */
function formatCpu(cpu: CpuShare): string {
  const parts = Object.entries(cpu).map(([name, share]) => `${name} ${formatFixed(share, 2)}`);
  return parts.length === 0 ? DASH : parts.join(' · ');
}

/**
 * `queue_full 1 234 · expired 12`, or `none`; codes that never occurred are left out. With the
 * bridge's overload refusals by reason: `queue_full 1 234 (queue_wait 1 200, event_loop 34)`.
 */
function formatErrors(errors: Record<string, number>, shed?: Record<string, number>): string {
  const reasons = Object.entries(shed ?? {}).filter(([, count]) => count > 0);
  const parts = Object.entries(errors)
    .filter(([, count]) => count > 0)
    .map(([code, count]) => {
      const why = code === 'queue_full' && reasons.length > 0 ? ` (${reasons.map(([r, n]) => `${r} ${formatInt(n)}`).join(', ')})` : '';
      return `${code} ${formatInt(count)}${why}`;
    });
  return parts.length === 0 ? 'none' : parts.join(' · ');
}

/**
 * maxRate over the maxRate of `reference` (echo, the bare handler, the BullMQ-built bridge) in
 * the same run, `0.27×`; `—` for the reference itself and when it is not in the run.
 */
function formatRatio(system: SystemResult, systems: readonly SystemResult[], reference: SystemResult['id']): string {
  if (system.id === reference) return DASH;
  const other = systems.find((s) => s.id === reference);
  if (other === undefined || !(other.maxRate > 0)) return DASH;
  return `${formatFixed(system.maxRate / other.maxRate, 2)}×`;
}

// A newline would end the heading or the table row.
function oneLine(text: string): string {
  return text.replace(/\r?\n/g, ' ');
}

// A `|` would end the cell.
function cell(text: string): string {
  return oneLine(text).replace(/\|/g, '\\|');
}

function table(headers: readonly string[], align: readonly Align[], rows: readonly string[][]): string {
  const line = (cells: readonly string[]): string => `| ${cells.map(cell).join(' | ')} |`;
  const rule = `|${align.map((a) => (a === 'r' ? '---:' : '---')).join('|')}|`;
  return [line(headers), rule, ...rows.map(line)].join('\n');
}

function heading(r: BenchResults): string {
  const m = r.machine;
  const machine = `${m.cpus} × ${m.cpuModel}, ${formatShort(m.memoryGb)} GB RAM, Node ${m.node}, Redis ${m.redis}`;
  const run = r.quick ? 'quick run' : 'full run';
  return oneLine(`## Bridge benchmark: ${machine} · upstream ${formatShort(r.upstreamLatencyMs)} ms · p99 limit ${formatShort(r.p99LimitMs)} ms · ${run}`);
}

function overheadCells(overhead: Latency | null): string[] {
  return [overhead?.p50, overhead?.p95, overhead?.p99].map(formatMs);
}

function mainTable(r: BenchResults): string {
  const headers = [
    'system',
    'max req/s',
    'vs echo',
    'vs (h)',
    'vs (q)',
    'p50 overhead ms',
    'p95 overhead ms',
    'p99 overhead ms',
    'CPU at max (cores)',
    'RSS at max MB',
  ];
  const rows = r.systems.map((s) => [
    s.label,
    formatInt(s.maxRate),
    formatRatio(s, r.systems, 'echo'),
    formatRatio(s, r.systems, 'handler'),
    formatRatio(s, r.systems, 'bullmq'),
    ...overheadCells(s.overheadAt1000Ms),
    formatCpu(s.cpuAtMax),
    formatInt(s.rssMb),
  ]);
  return table(headers, ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'l', 'r'], rows);
}

function notes(r: BenchResults): string {
  const gen = `${formatInt(r.generator.workers)} workers, ${formatInt(r.generator.connections)} connections`;
  const echo = r.systems.find((s) => s.id === 'echo');
  const ceiling =
    echo === undefined
      ? `No echo row, so the load generator's ceiling (${gen}) is unknown: a bridge max may be the generator's limit.`
      : `The echo row's max (${formatInt(echo.maxRate)} req/s) is also the load generator's ceiling (${gen}), so no bridge figure above it can be measured.`;
  const overhead = `Overhead is latency over the upstream's fixed ${formatShort(r.upstreamLatencyMs)} ms at 1 000 req/s (for echo, the whole latency).`;
  return `${overhead}\n${ceiling}`;
}

/** `OVERLOAD_QUEUE_WAIT_MS 1 000 · ttl_ms 2 000`, `defaults · ttl_ms 2 000`: what an overload step ran with. */
export function overloadSettings(o: Pick<OverloadResult, 'queueWaitMs' | 'ttlMs'>): string {
  const guard = o.queueWaitMs === undefined ? [] : [o.queueWaitMs > 0 ? `OVERLOAD_QUEUE_WAIT_MS ${formatInt(o.queueWaitMs)}` : 'defaults'];
  return [...guard, o.ttlMs === undefined ? 'no ttl_ms' : `ttl_ms ${formatInt(o.ttlMs)}`].join(' · ');
}

function rssRatio(o: OverloadResult): string {
  return o.rssStartMb > 0 ? formatFixed(o.rssEndMb / o.rssStartMb, 2) : DASH;
}

function overloadSection(systems: readonly SystemResult[]): string | undefined {
  const rows = systems.flatMap((s) => (s.overload ?? []).map((o) => overloadRow(s.label, o)));
  if (rows.length === 0) return undefined;
  const headers = [
    'system',
    'settings',
    'offered req/s',
    'duration s',
    'sent',
    'ok',
    'errors',
    'lost',
    'expired',
    'late',
    'reply p50 / p99 ms',
    'RSS MB',
    'RSS end/start',
    'survived',
  ];
  const align: Align[] = ['l', 'l', 'r', 'r', 'r', 'r', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'l'];
  const late = `Late: answered (ok or not) more than ${formatInt(LATE_AFTER_DEADLINE_MS)} ms after the device published + ttl_ms; — without a ttl_ms.`;
  return `### Overload\n\n${table(headers, align, rows)}\n\n${late}`;
}

function overloadRow(label: string, o: OverloadResult): string[] {
  return [
    label,
    overloadSettings(o),
    formatInt(o.rate),
    formatShort(o.durationS),
    formatInt(o.sent),
    formatInt(o.ok),
    formatErrors(o.errors, o.shed),
    formatInt(o.lost),
    formatInt(o.expired),
    o.ttlMs === undefined ? DASH : formatInt(o.late),
    `${formatMs(o.latencyMs.p50)} / ${formatMs(o.latencyMs.p99)}`,
    `${formatInt(o.rssStartMb)} → ${formatInt(o.rssEndMb)}`,
    rssRatio(o),
    o.survived ? 'yes' : 'no',
  ];
}

function idleSection(r: BenchResults): string | undefined {
  const idle = r.idle;
  if (idle === undefined) return undefined;
  const headers = [
    'devices',
    'connected',
    'dropped',
    'RSS before MB',
    'RSS peak MB',
    'RSS settled MB',
    'KB per connection (peak / settled)',
    'light load req/s',
    'p50 ms',
    'p99 ms',
    'lost',
  ];
  const row = [
    formatInt(idle.devices),
    formatInt(idle.connected),
    formatInt(idle.dropped),
    formatInt(idle.rssBeforeMb),
    formatInt(idle.rssPeakMb),
    formatInt(idle.rssSettledMb),
    `${formatFixed(idle.peakPerConnectionKb, 1)} / ${formatFixed(idle.settledPerConnectionKb, 1)}`,
    formatInt(idle.lightLoad.rate),
    formatMs(idle.lightLoad.latencyMs.p50),
    formatMs(idle.lightLoad.latencyMs.p99),
    formatInt(idle.lightLoad.lost),
  ];
  const explain = `Peak: the highest RSS while the devices connected and under the light load. Settled: RSS once V8 has given the connection burst's garbage back (read when RSS has fallen and held still for 3 s, at most ${idle.settleS} s after the light load).`;
  const note = idle.note === undefined ? '' : `\n\n${idle.note}`;
  return `### Idle connections\n\n${table(
    headers,
    headers.map(() => 'r' as const),
    [row],
  )}\n\n${explain}${note}`;
}

/** The summary: heading, one row per system, then overload and idle tables when measured. */
export function formatReport(results: BenchResults): string {
  const sections = [heading(results), mainTable(results), notes(results), overloadSection(results.systems), idleSection(results)];
  return `${sections.filter((s): s is string => s !== undefined).join('\n\n')}\n`;
}

/** Steps ordered by offered rate, the order a reader compares them in; the input is left as is. */
export function stepsByRate(steps: readonly StepResult[]): StepResult[] {
  return [...steps].sort((a, b) => a.rate - b.rate);
}

function stepRow(step: StepResult): string[] {
  const l = step.latencyMs;
  return [
    formatInt(step.rate),
    formatInt(step.achievedRate),
    formatInt(step.sent),
    formatInt(step.ok),
    formatErrors(step.errors, step.shed),
    formatInt(step.lost),
    formatMs(l.p50),
    formatMs(l.p95),
    formatMs(l.p99),
    formatMs(l.max),
    step.passed ? '✓' : '✗',
    formatCpu(step.cpu),
    formatInt(step.rssMb),
  ];
}

function stepsTable(system: SystemResult): string {
  if (system.steps.length === 0) return `### ${oneLine(system.label)}\n\nNo steps.`;
  const headers = ['rate', 'achieved req/s', 'sent', 'ok', 'errors', 'lost', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms', 'passed', 'CPU (cores)', 'RSS MB'];
  const align: Align[] = ['r', 'r', 'r', 'r', 'l', 'r', 'r', 'r', 'r', 'r', 'l', 'l', 'r'];
  return `### ${oneLine(system.label)}\n\n${table(headers, align, stepsByRate(system.steps).map(stepRow))}`;
}

/** Every step of every system, one table per system: the detail the summary leaves out. */
export function formatSteps(results: BenchResults): string {
  return `${results.systems.map(stepsTable).join('\n\n')}\n`;
}
