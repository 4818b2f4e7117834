#!/usr/bin/env node
// device-sim: runs a fleet against a broker and prints the result table (or JSON), with a
// progress line on stderr while it runs and hints when requests go unanswered.
// Exit codes: 0 nothing lost, 1 something lost, an idle device failed or the run failed,
// 2 bad command line.
import { realpathSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { UsageError } from '../contract/index.js';
import { loginOf } from './credentials.js';
import { emptyDiagnosis } from './diagnosis.js';
import { parseFleetArgs, runFleet, type FleetArgs } from './fleet.js';
import { redactUrl } from './fleet-options.js';
import { connectIdle, type IdleFleet } from './idle.js';
import { startLoad, type StepProgress } from './load.js';
import { startProgress, type LiveCounts, type Output, type Progress } from './progress.js';
import type { FleetReport } from './stats.js';
import { formatReport, reportOfStep } from './summary.js';

const USAGE = `usage: device-sim --url mqtt://127.0.0.1:1883 --devices 100 --rate 500 --duration 30
  --mix critical=1,high=9,normal=80,low=10 --qos 1 [--username u --password p]
  [--reply-timeout 60] [--prefix sim] [--connect-concurrency 50] [--seed n] [--questions n] [--json]
  [--username-from-id]  each device logs in with its own id as user name (--username 'cam-{id}'
                 is the same with a template: {id} is replaced by each device's id)
  [--password-file FILE]  the passwords: lines user:password, or one line, the password of every
                 device; blank lines and # comments are skipped
  [--mqtt5]      devices speak MQTT 5 (default 3.1.1): a refused publish shows its PUBACK reason
  [--client]     each device is edge-ai-bridge/client device code (retries off: a lost reply counts)
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

export interface DeviceSimIo {
  stdout?: Output;
  stderr?: Output;
  /** The plain progress line's interval when stderr is no terminal (default 5 s). */
  plainIntervalMs?: number;
}

interface IdleRun {
  fleet: IdleFleet;
  connectS: number;
}

/** Connects the idle devices of --idle, reporting progress and the outcome on stderr. */
async function startIdle(args: FleetArgs, log: (line: string) => void): Promise<IdleRun> {
  const url = new URL(args.url);
  const started = performance.now();
  log(`idle: connecting ${args.idle} devices`);
  // Credentials in the URL serve when no option gives any.
  const username = url.username === '' ? undefined : decodeURIComponent(url.username);
  const password = url.password === '' ? undefined : decodeURIComponent(url.password);
  const fleet = await connectIdle({
    // URL keeps an IPv6 literal's brackets, which net.connect does not take.
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port === '' ? 1883 : Number(url.port),
    count: args.idle,
    ...(args.prefix === undefined ? {} : { prefix: args.prefix }),
    ...(username === undefined ? {} : { username }),
    ...(password === undefined ? {} : { password }),
    ...(args.username === undefined ? {} : { login: (clientId: string) => loginOf(args, clientId) }),
    onProgress: (n) => log(`idle: ${n}/${args.idle} connected`),
  });
  const connectS = Math.round((performance.now() - started) / 100) / 10;
  log(`idle: ${fleet.connected} connected (${fleet.failed} failed) in ${connectS} s`);
  if (fleet.firstError !== undefined) log(`idle: first failure: ${fleet.firstError}`);
  return { fleet, connectS };
}

/** The fast fleet (--workers): one step at the asked rate, reported as the mqtt.js fleet's is. */
async function runThreaded(args: FleetArgs, progress: Progress): Promise<FleetReport> {
  const url = new URL(args.url);
  const fleet = await startLoad({
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    ports: [url.port === '' ? 1883 : Number(url.port)],
    devices: args.devices,
    workers: args.workers,
    mix: args.mix,
    prefix: args.prefix ?? 'sim',
    login: (id) => loginOf(args, id),
  });
  progress.log(`${fleet.devices} devices connected over ${fleet.workers} worker threads; sending ${args.rate}/s for ${args.durationS} s`);
  let latest: StepProgress = { elapsedS: 0, sent: 0, answered: 0, ok: 0, errors: {} };
  const diagnosis = emptyDiagnosis(false);
  progress.start((): LiveCounts => ({ sent: latest.sent, ok: latest.ok, errors: latest.errors, inFlight: latest.sent - latest.answered, diagnosis }));
  const replyTimeoutMs = args.replyTimeoutMs ?? 60_000;
  try {
    const step = await fleet.step(args.rate, args.durationS, replyTimeoutMs, {
      ...(args.ttlMs === undefined ? {} : { ttlMs: args.ttlMs }),
      onProgress: (p) => {
        latest = p;
      },
    });
    const config = {
      url: redactUrl(args.url),
      devices: args.devices,
      rate: args.rate,
      durationS: args.durationS,
      mix: args.mix,
      qos: args.qos,
      replyTimeoutMs,
      prefix: args.prefix ?? 'sim',
      ...(args.ttlMs === undefined ? {} : { ttlMs: args.ttlMs }),
      workers: fleet.workers,
    };
    return reportOfStep(step, config);
  } finally {
    progress.stop();
    await fleet.close();
  }
}

function idleSummary(idle: IdleRun): Record<string, unknown> {
  return {
    connected: idle.fleet.connected,
    failed: idle.fleet.failed,
    // Connected, then lost before the end of the run: the broker let go of them.
    dropped: idle.fleet.dropped,
    connectS: idle.connectS,
    ...(idle.fleet.firstError === undefined ? {} : { firstError: idle.fleet.firstError }),
  };
}

/** Runs device-sim with these arguments (without node and the script); the exit code, and the report when the run got that far. */
export async function runDeviceSim(argv: string[], io: DeviceSimIo = {}): Promise<{ code: number; report?: FleetReport }> {
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  if (argv.includes('--help') || argv.includes('-h')) {
    stdout.write(`${USAGE}\n`);
    return { code: 0 };
  }
  let args: FleetArgs;
  try {
    args = parseFleetArgs(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    stderr.write(`device-sim: ${err.message}\n`);
    return { code: 2 };
  }
  // stdout carries only the result, so --json output stays machine-readable.
  const progress = startProgress(stderr, io.plainIntervalMs);
  const log = (line: string): void => progress.log(line);
  let idle: IdleRun | undefined;
  let report: FleetReport;
  try {
    idle = args.idle > 0 ? await startIdle(args, log) : undefined;
    if (args.workers > 0) report = await runThreaded(args, progress);
    else report = await runFleet({ ...args, onProgress: log, onLive: (read) => progress.start(read) });
  } catch (err) {
    stderr.write(`device-sim: ${err instanceof Error ? err.message : String(err)}\n`);
    return { code: 1 };
  } finally {
    progress.stop();
    if (idle !== undefined) {
      log(`idle: closing ${idle.fleet.connected - idle.fleet.dropped} connections`);
      await idle.fleet.close();
    }
  }
  const idleFigures = idle === undefined ? undefined : idleSummary(idle);
  if (args.json) stdout.write(`${JSON.stringify(idleFigures === undefined ? report : { ...report, idle: idleFigures })}\n`);
  else {
    const idleLine =
      idleFigures === undefined
        ? ''
        : `idle devices: ${String(idleFigures.connected)} connected, ${String(idleFigures.failed)} failed, ${String(idleFigures.dropped)} dropped during the run\n`;
    stdout.write(`${formatReport(report)}\n${idleLine}`);
  }
  const idleOk = idle === undefined || (idle.fleet.failed === 0 && idle.fleet.dropped === 0);
  return { code: report.overall.lost === 0 && idleOk ? 0 : 1, report };
}

// Run as a program (also through the npm bin symlink), not when a test imports runDeviceSim.
const invokedAs = (path: string | undefined): string => {
  try {
    return path === undefined ? '' : realpathSync(path);
  } catch {
    return '';
  }
};
if (invokedAs(process.argv[1]) === fileURLToPath(import.meta.url)) {
  runDeviceSim(process.argv.slice(2)).then(
    ({ code }) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`device-sim: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
