// What the operator dashboard costs a bridge: CPU per reply on the hot path (the recorder:
// one claim and one reply observed), the fleet view of N instances' reports built once per
// tick, and one report's size in the shared Redis hash. Three runs; prints the median and
// spread as Markdown.
//
//   node dist/bench/dashboard-cost.js [--replies 500000] [--instances 10] [--runs 3]
import { parseArgs } from 'node:util';
import type { Reply } from '../contract/index.js';
import { buildReport, fleetView, type InstanceReport } from '../bridge/ops/dashboard/fleet.js';
import { DashboardRecorder } from '../bridge/ops/dashboard/recorder.js';

const { values } = parseArgs({ options: { replies: { type: 'string' }, instances: { type: 'string' }, runs: { type: 'string' } } });
const REPLIES = Number(values.replies ?? 500_000);
const INSTANCES = Number(values.instances ?? 10);
const RUNS = Number(values.runs ?? 3);

const reply = (i: number): Reply =>
  ({
    id: `r${i}`,
    ok: true,
    model: 'm',
    content: 'x',
    finish_reason: 'stop',
    cached: false,
    attempts: 1,
    priority: 'normal',
    timing: { queued_ms: 1, upstream_ms: 20, total_ms: 20 + (i % 50) },
  }) as Reply;

function observe(recorder: DashboardRecorder, count: number, devices: number): void {
  for (let i = 0; i < count; i += 1) {
    recorder.claimed('normal', i % 7);
    recorder.reply(reply(i), `dev-${i % devices}`);
  }
}

function report(instance: string): InstanceReport {
  const recorder = new DashboardRecorder(instance);
  observe(recorder, 1000, 500);
  const view = {
    instance,
    version: 'bench',
    startedAt: 0,
    broker: 'embedded' as const,
    store: 'redis' as const,
    connectedClients: 0,
    inFlight: 0,
    storeReachable: true,
    ready: true,
    notReady: [],
    seenAt: Date.now(),
  };
  return JSON.parse(JSON.stringify(buildReport(view, recorder.take(), [], []))) as InstanceReport;
}

const rows: Array<{ perReplyUs: number; fleetViewMs: number; reportBytes: number }> = [];
for (let run = 0; run < RUNS; run += 1) {
  const recorder = new DashboardRecorder('bench');
  const started = performance.now();
  observe(recorder, REPLIES, 5000);
  const perReplyUs = ((performance.now() - started) * 1000) / REPLIES;
  const reports = Array.from({ length: INSTANCES }, (_, i) => report(`i${i}`));
  const viewStarted = performance.now();
  fleetView(reports, null, Date.now(), 2);
  rows.push({ perReplyUs, fleetViewMs: performance.now() - viewStarted, reportBytes: JSON.stringify(reports[0]).length });
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const cell = (xs: number[], digits: number): string => `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)})`;
process.stdout.write(
  [
    `| dashboard cost, median (min–max) of ${RUNS} runs | |`,
    '| --- | --- |',
    `| recorder, µs per reply (a claim and a reply observed; ${REPLIES} replies, 5 000 devices) | ${cell(
      rows.map((r) => r.perReplyUs),
      2,
    )} |`,
    `| fleet view of ${INSTANCES} instances' reports (1 000 replies each), ms per tick | ${cell(
      rows.map((r) => r.fleetViewMs),
      1,
    )} |`,
    `| one instance's report, bytes (no provider) | ${rows[0]?.reportBytes ?? 0} |`,
  ].join('\n') + '\n',
);
