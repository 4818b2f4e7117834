#!/usr/bin/env node
// scada-sim: a Sparkplug B host application and UNS reader for testers. Shows the tags SCADA
// would see and, with --check, fails on the first break of the Sparkplug session rules or of
// the UNS payload contract.
// Exit codes: 0 done (with --check: no violation), 1 a violation under --check or no
// connection, 2 bad command line.
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { Tag, Violation } from './check.js';
import { startHost, type Host, type HostEvent } from './host.js';
import { formatEvent, formatScreen, formatTable, formatViolation } from './table.js';

const USAGE = `usage: scada-sim [--url mqtt://127.0.0.1:1883] [--username u --password p]
  [--host-id scada-sim]   the host id of the retained STATE topic spBv1.0/STATE/{id}
  [--group G]             only the Sparkplug group G (default: every group, spBv1.0/#)
  [--uns ROOT]            also read the UNS topics ROOT/# (JSON answers)
  [--check]               exit 1 at the first violation of the Sparkplug session rules or
                          of the UNS payload contract, naming it
  [--duration S]          stop after S seconds (with --check: exit 0 if nothing was broken)
  [--json]                print the final tag table as JSON on stdout`;

export interface ScadaSimArgs {
  url: string;
  username?: string;
  password?: string;
  hostId: string;
  group?: string;
  uns?: string;
  check: boolean;
  durationS?: number;
  json: boolean;
}

export interface ScadaSimReport {
  hostId: string;
  tags: Tag[];
  violations: Violation[];
  violationCount: number;
  first: Violation | null;
  rebirths: string[];
  messages: number;
}

interface Output {
  write(text: string): unknown;
  isTTY?: boolean;
}

export interface ScadaSimIo {
  stdout?: Output;
  stderr?: Output;
  /** Stops the run like the end of --duration (the CLI wires SIGINT/SIGTERM to it). */
  signal?: AbortSignal;
}

class UsageError extends Error {}

const LEVEL = /^[^/#+]+$/;

export function parseScadaSimArgs(argv: string[]): ScadaSimArgs {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      url: { type: 'string', default: 'mqtt://127.0.0.1:1883' },
      username: { type: 'string' },
      password: { type: 'string' },
      'host-id': { type: 'string', default: 'scada-sim' },
      group: { type: 'string' },
      uns: { type: 'string' },
      check: { type: 'boolean', default: false },
      duration: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  if (!/^(mqtts?|wss?|tcp|ssl):\/\//.test(values.url)) throw new UsageError(`--url must be mqtt://, mqtts://, ws:// or wss://, not ${values.url}`);
  if (!LEVEL.test(values['host-id'])) throw new UsageError('--host-id must be one topic level without / # +');
  if (values.group !== undefined && !LEVEL.test(values.group)) throw new UsageError('--group must be one topic level without / # +');
  if (values.uns !== undefined && (values.uns === '' || /[#+]/.test(values.uns) || values.uns.endsWith('/')))
    throw new UsageError('--uns must be a topic without # + or a trailing /');
  const durationS = values.duration === undefined ? undefined : Number(values.duration);
  if (durationS !== undefined && !(durationS > 0 && durationS <= 7 * 86_400)) throw new UsageError('--duration must be a number of seconds above 0');
  return {
    url: values.url,
    hostId: values['host-id'],
    check: values.check,
    json: values.json,
    ...(values.username === undefined ? {} : { username: values.username }),
    ...(values.password === undefined ? {} : { password: values.password }),
    ...(values.group === undefined ? {} : { group: values.group }),
    ...(values.uns === undefined ? {} : { uns: values.uns }),
    ...(durationS === undefined ? {} : { durationS }),
  };
}

/** Resolves when the run should end: the duration, the signal, or (with --check) a violation. */
function stopWhen(args: ScadaSimArgs, signal: AbortSignal | undefined): { done: Promise<void>; stop(): void } {
  let stop = (): void => undefined;
  const done = new Promise<void>((resolve) => {
    stop = resolve;
  });
  const timer = args.durationS === undefined ? undefined : setTimeout(stop, args.durationS * 1000);
  signal?.addEventListener('abort', stop, { once: true });
  if (signal?.aborted) stop();
  void done.then(() => clearTimeout(timer));
  return { done, stop };
}

function report(host: Host, args: ScadaSimArgs, messages: number): ScadaSimReport {
  const { checker } = host;
  return {
    hostId: args.hostId,
    tags: checker.table(),
    violations: checker.violations,
    violationCount: checker.violationCount,
    first: checker.first() ?? null,
    rebirths: host.rebirths,
    messages,
  };
}

/** Runs scada-sim with these arguments; returns the exit code and, once connected, the report. */
export async function runScadaSim(argv: string[], io: ScadaSimIo = {}): Promise<{ code: number; report?: ScadaSimReport }> {
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  if (argv.includes('--help') || argv.includes('-h')) {
    stdout.write(`${USAGE}\n`);
    return { code: 0 };
  }
  let args: ScadaSimArgs;
  try {
    args = parseScadaSimArgs(argv);
  } catch (err) {
    stderr.write(`scada-sim: ${(err as Error).message}\n${USAGE}\n`);
    return { code: 2 };
  }
  // A terminal gets the live table; a pipe gets one line per event (on stderr under --json,
  // so stdout carries only the JSON).
  const live = stdout.isTTY === true && !args.json;
  const lines = args.json ? stderr : stdout;
  const stopper = stopWhen(args, io.signal);
  let messages = 0;
  const onEvent = (event: HostEvent): void => {
    if (event.kind === 'message') messages += 1;
    if (event.kind === 'violation' && args.check) stopper.stop();
    const line = live ? undefined : formatEvent(event);
    if (line !== undefined) lines.write(`${line}\n`);
  };
  let host: Host;
  try {
    host = await startHost({
      url: args.url,
      hostId: args.hostId,
      onEvent,
      ...(args.username === undefined ? {} : { username: args.username }),
      ...(args.password === undefined ? {} : { password: args.password }),
      ...(args.group === undefined ? {} : { group: args.group }),
      ...(args.uns === undefined ? {} : { unsRoot: args.uns }),
    });
  } catch (err) {
    stopper.stop();
    stderr.write(`scada-sim: ${(err as Error).message}\n`);
    return { code: 1 };
  }
  const draw = (): void => {
    const { checker } = host;
    const first = checker.first();
    stdout.write(
      formatScreen(
        {
          hostId: args.hostId,
          url: args.url,
          tags: checker.table(),
          violations: checker.violationCount,
          ...(first ? { first } : {}),
          rebirths: host.rebirths.length,
          maxRows: Math.max(5, (process.stdout.rows ?? 40) - 6),
        },
        Date.now(),
      ),
    );
  };
  const redraw = live ? setInterval(draw, 500) : undefined;
  await stopper.done;
  clearInterval(redraw);
  await host.close();
  const result = report(host, args, messages);
  if (args.json) stdout.write(`${JSON.stringify(result)}\n`);
  else if (live) draw();
  else stdout.write(`${formatTable(result.tags, Date.now(), false)}\n`);
  if (args.check && result.first !== null) {
    stderr.write(`scada-sim: first violation: ${formatViolation(result.first)}\n`);
    return { code: 1, report: result };
  }
  return { code: 0, report: result };
}

async function main(): Promise<void> {
  const abort = new AbortController();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => abort.abort());
  const { code } = await runScadaSim(process.argv.slice(2), { signal: abort.signal });
  process.exitCode = code;
}

// Run as a program (also through the npm bin symlink), not when a test imports runScadaSim.
const invokedAs = (path: string | undefined): string => {
  try {
    return path === undefined ? '' : realpathSync(path);
  } catch {
    return '';
  }
};
if (invokedAs(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    process.stderr.write(`scada-sim: ${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = 1;
  });
}
