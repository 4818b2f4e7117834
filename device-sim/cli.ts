#!/usr/bin/env node
// device-sim: runs a fleet against a broker and prints the result table (or JSON).
// Exit codes: 0 nothing lost, 1 something lost, an idle device failed or the run failed,
// 2 bad command line.
import { performance } from 'node:perf_hooks';
import { parseFleetArgs, runFleet, type FleetArgs } from './fleet.js';
import { PRIORITIES, type Priority, UsageError } from '../contract/index.js';
import { connectIdle, type IdleFleet } from './idle.js';
import { formatTable, type FleetReport, type LatencySummary } from './stats.js';
import { startLoad, type StepSummary } from './load.js';

const USAGE = `usage: device-sim --url mqtt://127.0.0.1:1883 --devices 100 --rate 500 --duration 30
  --mix critical=1,high=9,normal=80,low=10 --qos 1 [--username u --password p]
  [--reply-timeout 60] [--prefix sim] [--connect-concurrency 50] [--seed n] [--questions n] [--json]
  [--ttl-ms N]   every request carries ttl_ms N; counts per priority the expired replies and the
                 late ones (more than 100 ms after publish + N)
  [--stream]     every request carries "stream": true; each device also subscribes to its stream
                 topic, and the table adds per priority the time from publish to the first chunk
  [--images DIR|generated --template NAME]
                 each request is a raw camera frame (the folder's .jpg/.png/.webp files in turn, or
                 generated frames for the upstream simulator) on devices/{id}/image/..., asking
                 the CONFIG_FILE template NAME
  [--idle N]     first connect N idle devices (<prefix>-idle-<n>, mqtt:// only), keep them during the run
  [--workers N]  spread the devices over N worker threads with raw MQTT frames and HDR histograms
                 (mqtt:// and QoS 1 only; for rates one thread with mqtt.js cannot offer)`;

const log = (line: string): void => {
  process.stderr.write(`device-sim: ${line}\n`);
};

/** Connects the idle devices of --idle, reporting progress and the outcome on stderr. */
async function startIdle(args: FleetArgs): Promise<{ fleet: IdleFleet; connectS: number }> {
  const url = new URL(args.url);
  const started = performance.now();
  log(`idle: connecting ${args.idle} devices`);
  const username = args.username ?? (url.username === '' ? undefined : decodeURIComponent(url.username));
  const password = args.password ?? (url.password === '' ? undefined : decodeURIComponent(url.password));
  const fleet = await connectIdle({
    // URL keeps an IPv6 literal's brackets, which net.connect does not take.
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port === '' ? 1883 : Number(url.port),
    count: args.idle,
    ...(args.prefix === undefined ? {} : { prefix: args.prefix }),
    ...(username === undefined ? {} : { username }),
    ...(password === undefined ? {} : { password }),
    onProgress: (n) => log(`idle: ${n}/${args.idle} connected`),
  });
  const connectS = Math.round((performance.now() - started) / 100) / 10;
  log(`idle: ${fleet.connected} connected (${fleet.failed} failed) in ${connectS} s`);
  if (fleet.firstError !== undefined) log(`idle: first failure: ${fleet.firstError}`);
  return { fleet, connectS };
}

/** The fast fleet (--workers): one step at the asked rate, with a live progress line on a TTY. */
async function runThreaded(args: FleetArgs): Promise<{ summary: StepSummary; lost: number }> {
  const url = new URL(args.url);
  const fleet = await startLoad({
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    ports: [url.port === '' ? 1883 : Number(url.port)],
    devices: args.devices,
    workers: args.workers,
    mix: args.mix,
    prefix: args.prefix ?? 'sim',
    ...(args.username === undefined ? {} : { username: args.username }),
    ...(args.password === undefined ? {} : { password: args.password }),
  });
  log(`${fleet.devices} devices connected over ${fleet.workers} worker threads; sending ${args.rate}/s for ${args.durationS} s`);
  try {
    const summary = await fleet.step(args.rate, args.durationS, args.replyTimeoutMs ?? 60_000, {
      ...(args.ttlMs === undefined ? {} : { ttlMs: args.ttlMs }),
      onProgress: (p) => {
        if (process.stderr.isTTY) process.stderr.write(`\r\x1b[2Kdevice-sim: ${p.elapsedS.toFixed(1)} s  sent ${p.sent}  answered ${p.answered}`);
      },
    });
    if (process.stderr.isTTY) process.stderr.write('\r\x1b[2K');
    return { summary, lost: summary.lost };
  } finally {
    await fleet.close();
  }
}

function formatThreaded(s: StepSummary): string {
  const ms = (l: LatencySummary | null): string =>
    l === null ? '-' : `p50 ${l.p50}  p95 ${l.p95}  p99 ${l.p99}  max ${l.max} ms`;
  const errors = Object.entries(s.errors).map(([code, n]) => `${code} ${n}`).join(', ') || 'none';
  const ttl = s.ttlMs === undefined ? '' : `  ttl_ms ${s.ttlMs}: late (over 100 ms past it) ${s.late}`;
  const perPriority = (p: Priority): string =>
    s.ttlMs === undefined ? '' : `, ${s.byPriority[p].expired} expired, ${s.byPriority[p].late} late`;
  return [
    `sent ${s.sent}  ok ${s.ok}  errors ${errors}  lost ${s.lost}  replies/s ${s.achievedRate}${ttl}`,
    `overall   ${ms(s.latencyMs)}`,
    ...PRIORITIES.map((p) => `${p.padEnd(9)} ${ms(s.byPriority[p].latencyMs)}  (${s.byPriority[p].answered} answered${perPriority(p)})`),
    ...(s.disconnects > 0 ? [`connections dropped by the broker: ${s.disconnects} (first: ${s.firstDisconnect})`] : []),
  ].join('\n');
}

async function main(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  let args: FleetArgs;
  try {
    args = parseFleetArgs(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`device-sim: ${err.message}\n`);
    return 2;
  }
  const idle = args.idle > 0 ? await startIdle(args) : undefined;
  let report: FleetReport | StepSummary;
  let lost: number;
  try {
    // stdout carries only the result, so --json output stays machine-readable.
    if (args.workers > 0) ({ summary: report, lost } = await runThreaded(args));
    else {
      report = await runFleet({ ...args, onProgress: log });
      lost = report.overall.lost;
    }
  } finally {
    if (idle !== undefined) {
      log(`idle: closing ${idle.fleet.connected - idle.fleet.dropped} connections`);
      await idle.fleet.close();
    }
  }
  const idleSummary =
    idle === undefined
      ? undefined
      : {
          connected: idle.fleet.connected,
          failed: idle.fleet.failed,
          // Connected, then lost before the end of the run: the broker let go of them.
          dropped: idle.fleet.dropped,
          connectS: idle.connectS,
          ...(idle.fleet.firstError === undefined ? {} : { firstError: idle.fleet.firstError }),
        };
  if (args.json) process.stdout.write(`${JSON.stringify(idleSummary === undefined ? report : { ...report, idle: idleSummary })}\n`);
  else {
    const idleLine =
      idleSummary === undefined
        ? ''
        : `idle devices: ${idleSummary.connected} connected, ${idleSummary.failed} failed, ${idleSummary.dropped} dropped during the run\n`;
    process.stdout.write(`${'overall' in report ? formatTable(report) : formatThreaded(report)}\n${idleLine}`);
  }
  const idleOk = idleSummary === undefined || (idleSummary.failed === 0 && idleSummary.dropped === 0);
  return lost === 0 && idleOk ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`device-sim: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
