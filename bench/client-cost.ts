// What the device client (edge-ai-bridge/client) costs the process that runs it, against a
// target that answers every request at once (the echo broker, bench/echo-server.ts, in its own
// process), so the generator, not the target, should be the limit:
// 1. one BridgeClient connection (MQTT 3.1.1, MQTT 5), closed loop with --in-flight calls;
// 2. device-sim's raw engine (device-sim/load.ts) on one connection at its best sustainable rate
//    (searched, then taken with headroom: SEARCH);
// 3. device-sim's mqtt.js fleet at a fixed rate, raw and with `client: true`.
// Each measurement runs in a fresh child process (this file with --child), so the CPU it reads
// (process.cpuUsage: every thread of the process) is its own alone and no configuration
// inherits another's heap or JIT state; the configurations take turns within each run, so the
// machine's noise hits all alike. Tables on stdout, progress on stderr.
//
//   node dist/bench/client-cost.js [--seconds 5] [--runs 3] [--in-flight 100] [--fleet-rate 1000]
//        [--raw-rate N (default: searched)] [--json] [--profile DIR (children under --cpu-prof)]
import { execFile } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { BridgeClient, type ChatInput } from '../client/index.js';
import { runFleet } from '../device-sim/fleet.js';
import { startLoad, type StepSummary } from '../device-sim/load.js';
import { startServiceProcess } from '../device-sim/service-process.js';
import { distFile } from './e2e/console.js';
import { alternatingRuns } from './paced-phase.js';
import { cpuSeconds } from './proc.js';
import { pct, spreadCell } from './runs-table.js';

const WARMUP_S = 1;
/** How long the raw engine waits for a step's last replies; the echo answers in milliseconds. */
const WAIT_MS = 5_000;
const NORMAL_ONLY = { critical: 0, high: 0, normal: 1, low: 0 };
/**
 * The raw engine's rate search: a step passes when it delivers what was offered, promptly. The
 * highest rate that passed sits at the echo's edge, where a longer measurement can tip over into
 * a growing backlog: the raw engine is measured at `headroom` of it.
 */
const SEARCH = { fromRate: 4_000, factor: 1.25, stepS: 2, leadS: 0.5, p99Ms: 50, delivered: 0.97, headroom: 0.8 };

type Kind = 'client' | 'raw' | 'fleet';
interface Config {
  label: string;
  kind: Kind;
  protocol: 4 | 5;
  /** The fleet's devices are BridgeClients (`client: true`). */
  client?: boolean;
}
const CONFIGS: Record<string, Config> = {
  'client-311': { label: 'one BridgeClient, MQTT 3.1.1, closed loop', kind: 'client', protocol: 4 },
  'client-5': { label: 'one BridgeClient, MQTT 5, closed loop', kind: 'client', protocol: 5 },
  raw: { label: 'device-sim raw engine (load.ts), 1 connection, 1 worker, MQTT 3.1.1, paced', kind: 'raw', protocol: 4 },
  'fleet-311': { label: 'device-sim mqtt.js fleet, 1 device, MQTT 3.1.1, paced', kind: 'fleet', protocol: 4 },
  'fleet-311-client': { label: 'the same with client: true (a BridgeClient per device)', kind: 'fleet', protocol: 4, client: true },
  'fleet-5': { label: 'device-sim mqtt.js fleet, 1 device, MQTT 5, paced', kind: 'fleet', protocol: 5 },
  'fleet-5-client': { label: 'the same with client: true', kind: 'fleet', protocol: 5, client: true },
};
/** Rows of the ratio table: [numerator, denominator]. */
const RATIOS: Array<[string, string]> = [
  ['client-311', 'raw'],
  ['client-5', 'raw'],
  ['fleet-311-client', 'fleet-311'],
  ['fleet-5-client', 'fleet-5'],
];

/** What a child measures: one configuration, or (`raw-search`) the raw engine's best rate. */
interface Job {
  config: string;
  port: number;
  echoPid: number;
  seconds: number;
  inFlight: number;
  /** The raw engine's or the fleet's rate. */
  rate: number;
  /** Device ids start with it: unique per child, so no session of another is taken over. */
  tag: string;
}
type Figures = Record<string, number>;

interface Window {
  seconds: number;
  /** This process's CPU, all threads, user + system. */
  cpuUs: number;
  /** The echo's CPU as a share of one core. */
  echoShare: number;
}

/** Opens a measured window; calling the result closes it. */
function openWindow(echoPid: number): () => Window {
  const [at, cpu, echo] = [performance.now(), process.cpuUsage(), cpuSeconds(echoPid)];
  return () => {
    const used = process.cpuUsage(cpu);
    const seconds = (performance.now() - at) / 1000;
    return { seconds, cpuUs: used.user + used.system, echoShare: (cpuSeconds(echoPid) - echo) / seconds };
  };
}

/** The figures every configuration reports, in table order. */
function figuresOf(w: Window, replies: number, p50: number, p99: number, failed: number): Figures {
  return {
    'replies/s': replies / w.seconds,
    'p50 ms': p50,
    'p99 ms': p99,
    'CPU µs/request': w.cpuUs / replies,
    // Which side was busy: near 100 % of a core, that process was the limit.
    'generator CPU %': w.cpuUs / w.seconds / 1e4,
    'echo CPU %': w.echoShare * 100,
    'errors+lost': failed,
  };
}

// About 300 bytes, as the raw engine's requests (device-sim/load-worker.ts), every text distinct.
const SYSTEM = 'You inspect welds on line B. Answer ok or defect.';
function chatRequest(seq: number): ChatInput {
  const user = `Camera ${seq % 64} frame ${seq}: seam continuous, bead width 4.1 mm, porosity none visible, temperature 71.4 C, shift 2. Verdict?`;
  return {
    messages: [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: user },
    ],
    max_tokens: 16,
  };
}

/** `inFlight` lanes, each awaiting one call after another; only calls ending inside the window count. */
async function clientJob(job: Job, protocol: 4 | 5): Promise<Figures> {
  const bridge = await BridgeClient.connect({ url: `mqtt://127.0.0.1:${job.port}`, deviceId: job.tag, protocolVersion: protocol, maxInFlight: job.inFlight });
  const latencies: number[] = [];
  let seq = 0;
  let failed = 0;
  let measuring = false;
  let stopped = false;
  const lane = async (): Promise<void> => {
    while (!stopped) {
      const sent = performance.now();
      try {
        await bridge.request(chatRequest(seq++));
        if (measuring) latencies.push(performance.now() - sent);
      } catch {
        if (measuring) failed += 1;
      }
    }
  };
  try {
    const lanes = Array.from({ length: job.inFlight }, lane);
    await sleep(WARMUP_S * 1000);
    const window = openWindow(job.echoPid);
    measuring = true;
    await sleep(job.seconds * 1000);
    const w = window();
    measuring = false;
    stopped = true;
    const replies = latencies.length;
    await Promise.all(lanes);
    return figuresOf(w, replies, pct(latencies, 0.5), pct(latencies, 0.99), failed);
  } finally {
    await bridge.close();
  }
}

const answeredOf = (s: StepSummary): number => s.ok + Object.values(s.errors).reduce((a, b) => a + b, 0);

function rawStepPassed(s: StepSummary): boolean {
  const due = s.rate * s.durationS;
  return s.sent >= SEARCH.delivered * due && answeredOf(s) >= SEARCH.delivered * due && s.lost === 0 && s.latencyMs.p99 <= SEARCH.p99Ms;
}

/** The raw engine, one device on one worker thread, at `job.rate` after a warm-up step. */
async function rawJob(job: Job): Promise<Figures> {
  const fleet = await startLoad({ host: '127.0.0.1', ports: [job.port], devices: 1, workers: 1, mix: NORMAL_ONLY, prefix: job.tag });
  try {
    await fleet.step(job.rate, WARMUP_S, WAIT_MS);
    const window = openWindow(job.echoPid);
    const s = await fleet.step(job.rate, job.seconds, WAIT_MS);
    const w = window();
    return figuresOf(w, answeredOf(s), s.latencyMs.p50, s.latencyMs.p99, answeredOf(s) - s.ok + s.lost);
  } finally {
    await fleet.close();
  }
}

/**
 * Raises the raw engine's rate by SEARCH.factor until a step fails twice running (once may be
 * a shared machine's hiccup); the last rate that passed.
 */
async function rawSearchJob(job: Job): Promise<Figures> {
  const fleet = await startLoad({ host: '127.0.0.1', ports: [job.port], devices: 1, workers: 1, mix: NORMAL_ONLY, prefix: job.tag });
  let best = 0;
  try {
    await fleet.step(SEARCH.fromRate, WARMUP_S, WAIT_MS);
    for (let rate = SEARCH.fromRate, failures = 0; failures < 2;) {
      const s = await fleet.step(rate, SEARCH.stepS + SEARCH.leadS, WAIT_MS, { leadS: SEARCH.leadS });
      const passed = rawStepPassed(s);
      process.stderr.write(`raw engine @ ${rate}/s: ${passed ? 'pass' : 'fail'}, ${s.achievedRate} replies/s, p99 ${s.latencyMs.p99} ms, lost ${s.lost}\n`);
      if (!passed) {
        failures += 1;
        await fleet.drain(WAIT_MS, 1000);
        continue;
      }
      [best, failures, rate] = [rate, 0, Math.round((rate * SEARCH.factor) / 100) * 100];
    }
  } finally {
    await fleet.close();
  }
  return { rate: best };
}

/** runFleet with one device at `job.rate`, after a warm-up run; measured from its first send to its return. */
async function fleetJob(job: Job, protocol: 4 | 5, client: boolean): Promise<Figures> {
  const base = {
    url: `mqtt://127.0.0.1:${job.port}`,
    devices: 1,
    rate: job.rate,
    mix: NORMAL_ONLY,
    qos: 1 as const,
    mqtt5: protocol === 5,
    client,
    replyTimeoutMs: WAIT_MS,
  };
  await runFleet({ ...base, durationS: WARMUP_S, prefix: `${job.tag}w` });
  let window: (() => Window) | undefined;
  const report = await runFleet({ ...base, durationS: job.seconds, prefix: job.tag, onLive: () => (window = openWindow(job.echoPid)) });
  const w = (window as () => Window)();
  const { ok, errors, lost, latencyMs } = report.overall;
  const failed = Object.values(errors).reduce((a, b) => a + b, 0);
  return figuresOf(w, ok + failed, latencyMs?.p50 ?? NaN, latencyMs?.p99 ?? NaN, failed + lost);
}

function runJob(job: Job): Promise<Figures> {
  if (job.config === 'raw-search') return rawSearchJob(job);
  const config = CONFIGS[job.config];
  if (config === undefined) throw new Error(`unknown configuration ${job.config}`);
  if (config.kind === 'client') return clientJob(job, config.protocol);
  if (config.kind === 'raw') return rawJob(job);
  return fleetJob(job, config.protocol, config.client === true);
}

const execFileAsync = promisify(execFile);

/** One job in a fresh child process (under --cpu-prof with `profileDir`); its figures. */
async function inChild(job: Job, profileDir: string | undefined): Promise<Figures> {
  const prof = profileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=${job.tag}.cpuprofile`];
  const { stdout, stderr } = await execFileAsync(process.execPath, [...prof, fileURLToPath(import.meta.url), '--child', JSON.stringify(job)]);
  if (stderr !== '') process.stderr.write(stderr);
  // A figure with no value (no reply at all) went through JSON as null.
  return JSON.parse(stdout, (_key, value: unknown) => (value === null ? NaN : value)) as Figures;
}

/** Columns padded to their widest cell; the first left-aligned, the others right-aligned. */
function textTable(rows: string[][]): string {
  const widths = (rows[0] ?? []).map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  const line = (r: string[]): string => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join('  ');
  return [line(rows[0] ?? []), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)].join('\n');
}

const isCount = (figure: string): boolean => !figure.endsWith(' ms');

function figuresTable(runs: Array<Map<string, Figures>>): string {
  const figures = Object.keys(runs[0]?.get('client-311') ?? {});
  const rows = [[`median (min–max) of ${runs.length}`, ...figures]];
  for (const name of Object.keys(CONFIGS)) {
    rows.push([
      name,
      ...figures.map((f) =>
        spreadCell(
          runs.map((r) => r.get(name)?.[f] ?? NaN),
          { count: isCount(f), unit: '' },
        ),
      ),
    ]);
  }
  return textTable(rows);
}

function ratioTable(runs: Array<Map<string, Figures>>): string {
  const ratio = (a: string, b: string, f: string): number[] => runs.map((r) => (r.get(a)?.[f] ?? NaN) / (r.get(b)?.[f] ?? NaN));
  // spreadCell's format with two decimals: ratios sit near 1.
  const cell = (xs: number[]): string => {
    const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
    if (s.length === 0) return '—';
    const median = s.length % 2 === 1 ? (s[(s.length - 1) / 2] as number) : ((s[s.length / 2 - 1] as number) + (s[s.length / 2] as number)) / 2;
    return `${median.toFixed(2)} (${(s[0] as number).toFixed(2)}–${(s[s.length - 1] as number).toFixed(2)})`;
  };
  const rows = [['ratio within each run', 'replies/s', 'CPU µs/request']];
  for (const [a, b] of RATIOS) rows.push([`${a} ÷ ${b}`, cell(ratio(a, b, 'replies/s')), cell(ratio(a, b, 'CPU µs/request'))]);
  return textTable(rows);
}

interface Settings {
  seconds: number;
  runs: number;
  inFlight: number;
  fleetRate: number;
  rawRate: number | undefined;
  json: boolean;
  profile: string | undefined;
}

function parseSettings(): Settings & { child: string | undefined } {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '5' },
      runs: { type: 'string', default: '3' },
      'in-flight': { type: 'string', default: '100' },
      'fleet-rate': { type: 'string', default: '1000' },
      'raw-rate': { type: 'string' },
      json: { type: 'boolean', default: false },
      profile: { type: 'string' },
      child: { type: 'string' },
    },
  });
  const s = {
    seconds: Number(values.seconds),
    runs: Number(values.runs),
    inFlight: Number(values['in-flight']),
    fleetRate: Number(values['fleet-rate']),
    rawRate: values['raw-rate'] === undefined ? undefined : Number(values['raw-rate']),
    json: values.json,
    profile: values.profile,
    child: values.child,
  };
  if (!(s.seconds > 0 && s.fleetRate > 0 && (s.rawRate ?? 1) > 0)) throw new Error('--seconds and the rates must be positive');
  if (!(Number.isInteger(s.runs) && s.runs > 0 && Number.isInteger(s.inFlight) && s.inFlight > 0))
    throw new Error('--runs and --in-flight must be positive integers');
  return s;
}

function printReport(s: Settings, raw: { rate: number; searched?: number }, runs: Array<Map<string, Figures>>, load: string): void {
  if (s.json) {
    const out = {
      settings: { ...s, rawRate: raw.rate, rawSearched: raw.searched },
      machine: { cpus: cpus().length, cpu: cpus()[0]?.model.trim(), node: process.version, load },
      runs: runs.map((r) => Object.fromEntries(r)),
    };
    return void process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  }
  console.log(`${cpus().length} × ${cpus()[0]?.model.trim()}, Node ${process.version}; load average ${load}`);
  console.log(`Target: the echo broker (bench/echo-server.ts, its own process). ${s.seconds} s measured after ${WARMUP_S} s warm-up, each in a fresh process.`);
  const searched = raw.searched === undefined ? '' : ` (${SEARCH.headroom * 100} % of ${raw.searched}/s, the highest rate that passed the search)`;
  console.log(
    `Closed loop: ${s.inFlight} calls in flight (maxInFlight ${s.inFlight}). Raw engine paced at ${raw.rate}/s${searched}. Fleet: 1 device, ${s.fleetRate}/s, QoS 1.`,
  );
  console.log(`CPU µs/request: the generator process's user + system CPU (all its threads) over the window ÷ replies.\n`);
  console.log(
    `${Object.entries(CONFIGS)
      .map(([name, c]) => `${name.padEnd(19)} ${c.label}`)
      .join('\n')}\n`,
  );
  console.log(`${figuresTable(runs)}\n\n${ratioTable(runs)}`);
}

async function main(): Promise<void> {
  const s = parseSettings();
  if (s.child !== undefined) {
    process.stdout.write(JSON.stringify(await runJob(JSON.parse(s.child) as Job)));
    process.exit(0); // mqtt.js' reconnect timers would keep a child alive
  }
  const loadBefore = loadavg()[0]?.toFixed(2) ?? '?';
  // Contract-complete replies: the fleet's raw devices validate them (and count others as malformed).
  const echo = await startServiceProcess({ LOG_LEVEL: 'warn', ECHO_CONTRACT_REPLY: '1' }, { script: distFile('bench/echo-server.js') });
  try {
    const job = (config: string, tag: string, rate: number): Job => ({
      config,
      port: echo.mqttPort,
      echoPid: echo.child.pid as number,
      seconds: s.seconds,
      inFlight: s.inFlight,
      rate,
      tag,
    });
    const searched = s.rawRate === undefined ? ((await inChild(job('raw-search', 'cc-search', 0), undefined)).rate ?? 0) : undefined;
    if (searched === 0) throw new Error(`the raw engine sustained no rate from ${SEARCH.fromRate}/s up`);
    const raw = { rate: s.rawRate ?? Math.round(((searched as number) * SEARCH.headroom) / 100) * 100, ...(searched === undefined ? {} : { searched }) };
    const runs = await alternatingRuns(s.runs, Object.keys(CONFIGS), (config, run) =>
      inChild(job(config, `cc${run + 1}-${config}`, config === 'raw' ? raw.rate : s.fleetRate), s.profile),
    );
    printReport(s, raw, runs, `${loadBefore} before, ${loadavg()[0]?.toFixed(2)} after`);
  } finally {
    await echo.stop();
  }
}

await main();
