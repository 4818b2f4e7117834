#!/usr/bin/env node
// device-sim: runs a fleet against a broker and prints the result table (or JSON).
// Exit codes: 0 nothing lost, 1 something lost, an idle device failed or the run failed,
// 2 bad command line.
import { performance } from 'node:perf_hooks';
import { parseFleetArgs, runFleet, UsageError, type FleetArgs } from './fleet.js';
import { connectIdle, type IdleFleet } from './idle.js';
import { formatTable } from './stats.js';

const USAGE = `usage: device-sim --url mqtt://127.0.0.1:1883 --devices 100 --rate 500 --duration 30
  --mix critical=1,high=9,normal=80,low=10 --qos 1 [--username u --password p]
  [--reply-timeout 60] [--prefix sim] [--connect-concurrency 50] [--seed n] [--questions n] [--json]
  [--idle N]   first connect N idle devices (<prefix>-idle-<n>, mqtt:// only), keep them during the run`;

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
  let report;
  try {
    // stdout carries only the result, so --json output stays machine-readable.
    report = await runFleet({ ...args, onProgress: log });
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
    process.stdout.write(`${formatTable(report)}\n${idleLine}`);
  }
  const idleOk = idleSummary === undefined || (idleSummary.failed === 0 && idleSummary.dropped === 0);
  return report.overall.lost === 0 && idleOk ? 0 : 1;
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
