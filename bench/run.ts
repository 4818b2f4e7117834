// `npm run bench`: one run that measures, side by side and on the same workload, (a) an MQTT
// echo through the project's own broker, (b) the bridge with the memory store and (c) the
// bridge with the Redis store, all against the upstream simulator at a fixed latency; on request
// more (two instances, the plant's broker with 1 to 3 instances: bench/plant.ts).
// Prints a Markdown table and writes bench/results/latest.json and latest.svg.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem, release } from 'node:os';
import { parseArgs } from 'node:util';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { startServiceProcess, type ServiceProcess } from '../device-sim/service-process.js';
import { startLoad, type LoadFleet, type StepSummary } from '../device-sim/load.js';
import { connectIdle } from '../device-sim/idle.js';
import { deleteDeployment } from '../bridge/store/redis-keys.js';
import { startPrivateRedis, type PrivateRedis } from './redis-server.js';
import { startPlant } from './plant.js';
import { CpuMeter, cpuSeconds, isAlive, rssMb } from './proc.js';
import { formatReport, formatSteps } from './report.js';
import { renderLatencyChart } from './svg.js';
import type { BenchResults, IdleResult, Latency, OverloadResult, StepResult, SystemId, SystemResult } from './results.js';

const USAGE = `usage: npm run bench [-- --quick] [--systems echo,handler,bullmq,memory,redis] [--idle 20000] [--out bench/results]
  [--workers 2] [--devices 200] [--profile DIR] [--rates 1000,2000 [--seconds 15]]
  --rates: only these fixed rates, each for --seconds (default 3), no step search and no overload
  step: for comparing builds by the CPU per request the log line reports (µs/req).
  handler: Aedes + a handler calling the upstream with undici, no queue, no limits, no guarantees.
  handler-thread (not in the default run): the same with the upstream calls in a worker thread.
  bullmq: Aedes + BullMQ (priority, limiter, worker concurrency) + undici, on the same Redis.
  redis-x2 (not in the default run): two bridge instances on one Redis, devices spread over both.
  plant-x1, plant-x2, plant-x3 (not in the default run): 1, 2 or 3 bridges with BROKER_URL on a
  private Mosquitto (one shared subscription) and one Redis; the devices connect to Mosquitto.
  REDIS_URL: use that Redis for (c) and (d); otherwise a redis-server is started on a free port.`;

const SYSTEMS: readonly SystemId[] = ['echo', 'handler', 'handler-thread', 'bullmq', 'memory', 'redis', 'redis-x2', 'plant-x1', 'plant-x2', 'plant-x3'];
const PLANT_INSTANCES: Partial<Record<SystemId, number>> = { 'plant-x1': 1, 'plant-x2': 2, 'plant-x3': 3 };
const UPSTREAM_LATENCY_MS = 20;
const P99_LIMIT_MS = 250;
const MIX = { critical: 1, high: 9, normal: 80, low: 10 };

interface Plan {
  quick: boolean;
  /** Seconds at 1 000 and at 2 000 req/s before the first step, not recorded. */
  warmUpS: [number, number];
  /** After a failed step: the longest wait for the replies it still owes (given up after
   * drainStallMs without one: replies owed by dropped connections never come), then a pause. */
  drainMs: number;
  drainStallMs: number;
  settleMs: number;
  /** Replies later than this after a step's last send count as lost (a passing step needs p99 < 250 ms anyway). */
  waitMs: number;
  /** Measured seconds per step, after `leadS` seconds at the same rate that are not recorded. */
  stepS: number;
  leadS: number;
  /** Rates tried in turn until one fails; then the gap is bisected. */
  ladder: number[];
  bisections: number;
  overloadS: number;
  /** Fixed rates given with --rates: every rate is run, none is searched, no overload step. */
  fixed: boolean;
  idle: number;
}

const FULL: Omit<Plan, 'idle' | 'fixed'> = { quick: false, warmUpS: [2, 3], drainMs: 20_000, drainStallMs: 2000, settleMs: 1000, waitMs: 2000, stepS: 3, leadS: 1, ladder: [1000, 2000, 4000, 8000, 16000, 24000, 32000, 48000], bisections: 2, overloadS: 10 };
const QUICK: Omit<Plan, 'idle' | 'fixed'> = { quick: true, warmUpS: [0.5, 0.5], drainMs: 3000, drainStallMs: 500, settleMs: 200, waitMs: 1000, stepS: 1, leadS: 0.2, ladder: [1000, 4000, 16000, 32000], bisections: 1, overloadS: 1.5 };

/** The probe after the overload step waits this long for its replies. */
const PROBE_WAIT_MS = 2000;
/** The overload step waits this long for its last terminal replies: all must come. */
const OVERLOAD_WAIT_MS = 30_000;
/** Bisected rates are multiples of this: the ladder's gaps from 1 000 up bisect to multiples of 250 anyway. */
const RATE_ROUNDING = 125;

const sum = (values: number[]): number => values.reduce((a, b) => a + b, 0);

function log(line: string): void {
  process.stderr.write(`bench: ${line}\n`);
}

/** One line rewritten in place on a TTY, so a 3-minute run shows it is alive. */
function progress(line: string): void {
  if (process.stderr.isTTY) process.stderr.write(`\r\x1b[2K${line}`);
}

function endProgress(): void {
  if (process.stderr.isTTY) process.stderr.write('\r\x1b[2K');
}

function distFile(rel: string): string {
  return fileURLToPath(new URL(rel, import.meta.url));
}

interface Upstream {
  url: string;
  child: ChildProcess;
}

async function startUpstream(): Promise<Upstream> {
  const child = spawn(process.execPath, [distFile('../upstream-sim/cli.js'), '--port', '0', '--latency-ms', String(UPSTREAM_LATENCY_MS)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`upstream-sim exited with ${code}`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const match = /listening on (\S+)/.exec(line);
      if (match) resolve(match[1]!);
    });
  });
  return { url, child };
}

/** 20 ms upstream × 10 000 req/s = 200 calls in flight; more only makes bursts. */
const MAX_CONCURRENCY = '256';

function bridgeEnv(upstreamUrl: string, extra: Record<string, string>): Record<string, string> {
  return {
    UPSTREAM_URL: upstreamUrl,
    // Limits a deployment of this size would set: the bench measures the bridge, not its quotas.
    MAX_CONCURRENCY,
    RATE_LIMIT_RPM: '100000000',
    DEVICE_RATE_LIMIT_RPM: '1000000',
    // Past the knee, refuse normal and low work that would wait over a second rather than
    // queue it for many (off by default). A passing step's p99 is under 250 ms, so it never
    // acts there: it only shapes the overload step.
    OVERLOAD_QUEUE_WAIT_MS: '1000',
    // LOG_LEVEL stays at its default (info): per-request lines are debug, as in production.
    ...extra,
  };
}

function toStep(s: StepSummary, cpu: Record<string, number>, rss: number): StepResult {
  const errorCount = Object.values(s.errors).reduce((a, b) => a + b, 0);
  // A generator that fell well behind its schedule did not offer the rate: that step says nothing.
  const offered = s.sent >= 0.97 * s.rate * s.durationS;
  return {
    rate: s.rate,
    durationS: s.durationS,
    sent: s.sent,
    answered: s.ok + errorCount,
    ok: s.ok,
    errors: s.errors,
    lost: s.lost,
    achievedRate: s.achievedRate,
    latencyMs: s.latencyMs,
    passed: offered && s.lost === 0 && errorCount === 0 && s.latencyMs.p99 < P99_LIMIT_MS,
    cpu,
    rssMb: rss,
  };
}

interface Sut {
  id: SystemId;
  label: string;
  /** `broker` for the reference systems without a queue (a, h): they get no overload step. */
  role: 'broker' | 'bridge';
  /** One process, or several instances sharing one Redis. */
  services: ServiceProcess[];
  /** Where the devices connect, spread over them: the services' own ports, or the plant's broker. */
  ports: number[];
  /** Extra per-process CPU sources for this system (Redis, Mosquitto). */
  cpu: Record<string, () => number>;
  /** Our bridge's overload refusals so far, by reason (the other systems have none). */
  shed?: () => Promise<Record<string, number>>;
  stop(): Promise<void>;
}

async function measureSystem(sut: Sut, plan: Plan, upstream: Upstream, workers: number, devices: number): Promise<SystemResult> {
  const pids = sut.services.map((s) => s.child.pid!);
  // With several instances, each one's share too (`bridge-1`, `bridge-2` …) after the sum.
  const perInstance = pids.length > 1 ? Object.fromEntries(pids.map((pid, i) => [`${sut.role}-${i + 1}`, () => cpuSeconds(pid)])) : {};
  const meter = new CpuMeter({
    [sut.role]: () => sum(pids.map((pid) => cpuSeconds(pid))),
    generator: () => cpuSeconds('self'),
    upstream: () => cpuSeconds(upstream.child.pid!),
    ...sut.cpu,
    ...perInstance,
  });
  const fleet = await startLoad({
    host: '127.0.0.1',
    ports: sut.ports,
    devices,
    workers,
    mix: MIX,
    prefix: `bench-${sut.id}`,
  });
  const rss = (): number => sum(pids.map((pid) => rssMb(pid)));
  const steps: StepResult[] = [];
  const run = async (rate: number, durationS: number, waitMs = plan.waitMs, leadS = 0): Promise<StepSummary> =>
    fleet.step(rate, durationS + leadS, waitMs, {
      leadS,
      onProgress: (p) => progress(`bench: ${sut.label} @ ${rate} req/s  ${p.elapsedS.toFixed(1)} s  sent ${p.sent}  answered ${p.answered}`),
    });
  const measure = async (rate: number): Promise<StepResult> => {
    const shedBefore = await sut.shed?.();
    meter.begin();
    const summary = await run(rate, plan.stepS, plan.waitMs, plan.leadS);
    const step = toStep(summary, meter.end(), rss());
    endProgress();
    if (sut.shed && shedBefore) step.shed = countsSince(shedBefore, await sut.shed());
    const perRequestUs = step.achievedRate > 0 ? Math.round(((step.cpu[sut.role] ?? 0) / step.achievedRate) * 1e6) : 0;
    log(
      `${sut.label} @ ${rate}: ${step.passed ? 'pass' : 'FAIL'}  ${step.achievedRate} replies/s  p50 ${step.latencyMs.p50} p99 ${step.latencyMs.p99} ms` +
        `  lost ${step.lost}  errors ${JSON.stringify(step.errors)}${step.shed ? `  shed ${JSON.stringify(step.shed)}` : ''}  cpu ${JSON.stringify(step.cpu)}  ${perRequestUs} µs/req  rss ${step.rssMb} MB`,
    );
    steps.push(step);
    // A failed step leaves a backlog behind; the next must not inherit it.
    if (!step.passed) {
      const owed = await fleet.drain(plan.drainMs, plan.drainStallMs);
      if (owed > 0) log(`${sut.label}: ${owed} replies owed so far will not come (dropped connections or stalled); going on`);
      await sleep(plan.settleMs);
    }
    return step;
  };
  try {
    // Warm-up (JIT, heap, connections, scripts), not recorded: a cold bridge needs several
    // seconds of load before its code is optimised, and a first step would measure that.
    await run(1000, plan.warmUpS[0]);
    await run(2000, plan.warmUpS[1]);
    // A system whose knee is below the warm-up rate (a plant instance) still owes a backlog.
    const owed = await fleet.drain(plan.drainMs, plan.drainStallMs);
    if (owed > 0) log(`${sut.label}: ${owed} warm-up replies owed will not come; going on`);
    let best: StepResult | undefined;
    let failedAt: number | undefined;
    for (const rate of plan.ladder) {
      const step = await measure(rate);
      if (step.passed) best = step;
      else if (!plan.fixed) {
        failedAt = rate;
        break;
      }
    }
    for (let i = 0; i < plan.bisections && failedAt !== undefined; i += 1) {
      const low = best?.rate ?? 0;
      const rate = Math.round((low + failedAt) / 2 / RATE_ROUNDING) * RATE_ROUNDING;
      if (rate <= low || rate >= failedAt) break;
      const step = await measure(rate);
      if (step.passed) best = step;
      else failedAt = rate;
    }
    const at1000 = steps.find((s) => s.rate === 1000);
    const upstreamMs = sut.id === 'echo' ? 0 : UPSTREAM_LATENCY_MS;
    const over = (ms: number): number => Math.round((ms - upstreamMs) * 10) / 10;
    const result: SystemResult = {
      id: sut.id,
      label: sut.label,
      maxRate: best?.rate ?? 0,
      overheadAt1000Ms: at1000
        ? { p50: over(at1000.latencyMs.p50), p95: over(at1000.latencyMs.p95), p99: over(at1000.latencyMs.p99), max: over(at1000.latencyMs.max) }
        : null,
      cpuAtMax: best?.cpu ?? {},
      rssMb: best?.rssMb ?? rss(),
      steps,
    };
    if (sut.role === 'bridge' && best && !plan.fixed) result.overload = await overload(pids, rss, sut, fleet, best.rate * 2, plan, run);
    return result;
  } finally {
    await fleet.close();
  }
}

async function overload(
  pids: number[],
  rss: () => number,
  sut: Sut,
  fleet: LoadFleet,
  rate: number,
  plan: Plan,
  run: (rate: number, durationS: number, waitMs?: number, leadS?: number) => Promise<StepSummary>,
): Promise<OverloadResult> {
  const rssStartMb = rss();
  const shedBefore = await sut.shed?.();
  const s = await run(rate, plan.overloadS, OVERLOAD_WAIT_MS);
  endProgress();
  const shed = sut.shed && shedBefore ? countsSince(shedBefore, await sut.shed()) : undefined;
  const alive = pids.every((pid) => isAlive(pid));
  const rssEndMb = alive ? rss() : 0;
  // Alive is not enough: it must still answer.
  const probe = alive ? await fleet.step(100, 1, PROBE_WAIT_MS) : undefined;
  const result: OverloadResult = {
    rate,
    durationS: plan.overloadS,
    sent: s.sent,
    ok: s.ok,
    errors: s.errors,
    lost: s.lost,
    rssStartMb,
    rssEndMb,
    latencyMs: { p50: s.latencyMs.p50, p99: s.latencyMs.p99 },
    survived: alive && probe !== undefined && probe.lost === 0 && probe.ok === probe.sent,
    ...(shed ? { shed } : {}),
  };
  log(`${sut.label} overload @ ${rate}: sent ${s.sent} ok ${s.ok} errors ${JSON.stringify(s.errors)}${shed ? ` shed ${JSON.stringify(shed)}` : ''} lost ${s.lost} p50 ${s.latencyMs.p50} p99 ${s.latencyMs.p99} ms rss ${rssStartMb} → ${rssEndMb} MB survived ${result.survived}`);
  return result;
}

async function startSut(id: SystemId, upstream: Upstream, redisUrl: string, profileDir: string | undefined): Promise<Sut> {
  const nodeArgs = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
  if (id === 'echo') {
    const service = await startServiceProcess({ LOG_LEVEL: 'warn' }, { script: distFile('./echo-server.js'), nodeArgs });
    return { id, label: '(a) MQTT echo', role: 'broker', services: [service], ports: [service.mqttPort], cpu: {}, stop: async () => void (await service.stop()) };
  }
  if (id === 'handler' || id === 'handler-thread') {
    const threaded = id === 'handler-thread';
    const env = { LOG_LEVEL: 'warn', UPSTREAM_URL: upstream.url, MAX_CONCURRENCY, ...(threaded ? { HANDLER_THREAD: '1' } : {}) };
    const service = await startServiceProcess(env, { script: distFile('./echo-server.js'), nodeArgs });
    const label = threaded ? '(h2) handler, HTTP in a worker thread' : '(h) bare handler';
    return { id, label, role: 'broker', services: [service], ports: [service.mqttPort], cpu: {}, stop: async () => void (await service.stop()) };
  }
  if (id === 'memory') {
    const service = await startServiceProcess(bridgeEnv(upstream.url, {}), { nodeArgs });
    return {
      id,
      label: '(b) bridge + memory',
      role: 'bridge',
      services: [service],
      ports: [service.mqttPort],
      cpu: {},
      shed: () => shedCounts([service]),
      stop: async () => void (await service.stop()),
    };
  }
  const prefix = `bench-${randomBytes(4).toString('hex')}`;
  const env = bridgeEnv(upstream.url, { REDIS_URL: redisUrl, REDIS_PREFIX: prefix });
  const plantInstances = PLANT_INSTANCES[id];
  const plant = plantInstances ? await startPlant({ instances: plantInstances, env, name: `${prefix}-bridge`, nodeArgs }) : undefined;
  const services: ServiceProcess[] = plant?.services ?? [];
  for (let i = 0; !plant && i < (id === 'redis-x2' ? 2 : 1); i += 1) {
    const script = id === 'bullmq' ? distFile('./bullmq-server.js') : undefined;
    services.push(await startServiceProcess(id === 'bullmq' ? { ...env, LOG_LEVEL: 'warn' } : env, { nodeArgs, ...(script ? { script } : {}) }));
  }
  const admin = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await admin.connect();
  // Redis' own CPU counters, so a Redis the bench did not start is measured too.
  let redisCpu = 0;
  const readRedisCpu = async (): Promise<void> => {
    const info = await admin.info('cpu');
    const field = (name: string): number => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0);
    redisCpu = field('used_cpu_user') + field('used_cpu_sys');
  };
  await readRedisCpu();
  const poll = setInterval(() => void readRedisCpu().catch(() => undefined), 250);
  return {
    id,
    label: LABELS[id] ?? id,
    role: 'bridge',
    services,
    ports: plant?.ports ?? services.map((s) => s.mqttPort),
    cpu: { redis: () => redisCpu, ...(plant ? { mosquitto: () => cpuSeconds(plant.mosquitto.pid) } : {}) },
    ...(id === 'bullmq' ? {} : { shed: () => shedCounts(services) }),
    async stop() {
      clearInterval(poll);
      await (plant ? plant.stop() : Promise.all(services.map((s) => s.stop())));
      await deleteDeployment(admin, prefix);
      admin.disconnect();
    },
  };
}

const LABELS: Partial<Record<SystemId, string>> = {
  bullmq: '(q) BullMQ bridge',
  redis: '(c) bridge + Redis',
  'redis-x2': '(d) 2 bridges + Redis',
  'plant-x1': '(p1) Mosquitto + 1 bridge + Redis',
  'plant-x2': '(p2) Mosquitto + 2 bridges + Redis',
  'plant-x3': '(p3) Mosquitto + 3 bridges + Redis',
};

/** `edge_ai_bridge_shed_total` of every instance, summed by reason. */
async function shedCounts(services: ServiceProcess[]): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const service of services) {
    const text = await (await fetch(`http://127.0.0.1:${service.httpPort}/metrics`)).text();
    for (const [, labels = '', value] of text.matchAll(/^edge_ai_bridge_shed_total\{([^}]*)\} (\d+)$/gm)) {
      const reason = /reason="([^"]+)"/.exec(labels)?.[1] ?? 'unknown';
      counts[reason] = (counts[reason] ?? 0) + Number(value);
    }
  }
  return counts;
}

/** What each count grew by since `before`, leaving out those that did not. */
function countsSince(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - (before[k] ?? 0)]).filter(([, n]) => n !== 0));
}

async function measureIdle(count: number, upstream: Upstream, lightLoadS: number, settleS: number): Promise<IdleResult> {
  const service = await startServiceProcess(bridgeEnv(upstream.url, { MAX_CONNECTIONS: String(count + 1000) }));
  const pid = service.child.pid!;
  try {
    const rssBeforeMb = rssMb(pid);
    let rssPeakMb = rssBeforeMb;
    const sampler = setInterval(() => (rssPeakMb = Math.max(rssPeakMb, rssMb(pid))), 250);
    const fleet = await connectIdle({ host: '127.0.0.1', port: service.mqttPort, count });
    try {
      const report = await lightLoad(service.mqttPort, lightLoadS);
      const rssSettledMb = await settledRss(pid, settleS);
      const perConnectionKb = (mb: number): number => (fleet.connected > 0 ? Math.round(((mb - rssBeforeMb) * 1024 * 10) / fleet.connected) / 10 : 0);
      const latency = report.overall.latencyMs ?? { p50: 0, p95: 0, p99: 0, max: 0 };
      return {
        devices: count,
        connected: fleet.connected,
        dropped: fleet.dropped,
        rssBeforeMb,
        rssPeakMb,
        rssSettledMb,
        peakPerConnectionKb: perConnectionKb(rssPeakMb),
        settledPerConnectionKb: perConnectionKb(rssSettledMb),
        settleS,
        lightLoad: { rate: LIGHT_LOAD_RATE, latencyMs: { p50: latency.p50, p95: latency.p95, p99: latency.p99, max: latency.max }, lost: report.overall.lost },
      };
    } finally {
      clearInterval(sampler);
      await fleet.close();
    }
  } finally {
    await service.stop();
  }
}

const LIGHT_LOAD_RATE = 100;

/** `device-sim` with 10 devices at 100 req/s beside the idle ones, as a separate process. */
async function lightLoad(mqttPort: number, durationS: number): Promise<{ overall: { lost: number; latencyMs: Latency | null } }> {
  const sim = spawn(
    process.execPath,
    [distFile('../device-sim/cli.js'), '--url', `mqtt://127.0.0.1:${mqttPort}`, '--devices', '10', '--rate', String(LIGHT_LOAD_RATE), '--duration', String(durationS), '--json'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  sim.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  await new Promise((resolve) => sim.once('exit', resolve));
  return JSON.parse(out) as { overall: { lost: number; latencyMs: Latency | null } };
}

/**
 * The bridge's RSS once the connection burst's garbage is given back. V8 returns it only when
 * its memory reducer runs, some seconds after allocation calms (about 30 s after the burst on
 * the reference machine), so this waits for RSS to fall by a tenth and then hold still for
 * 3 s, or for `maxS` seconds, whichever comes first, and reads it then.
 */
async function settledRss(pid: number, maxS: number): Promise<number> {
  const deadline = Date.now() + maxS * 1000;
  const start = rssMb(pid);
  let last = start;
  let stillSince = Date.now();
  while (Date.now() < deadline) {
    await sleep(500);
    const now = rssMb(pid);
    if (now !== last) stillSince = Date.now();
    last = now;
    if (now <= start * 0.9 && Date.now() - stillSince >= 3000) break;
  }
  return last;
}

/** Sockets for the generator's or bridge's own use besides the idle devices. */
const FD_HEADROOM = 200;

function hardFileLimit(): number {
  const match = /Max open files\s+\d+\s+(\d+|unlimited)/.exec(readFileSync('/proc/self/limits', 'utf8'));
  return match?.[1] === undefined || match[1] === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(match[1]);
}

async function machine(redisUrl: string | undefined): Promise<BenchResults['machine']> {
  let redis = 'not used';
  if (redisUrl) {
    const r = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await r.connect();
    redis = /redis_version:(\S+)/.exec(await r.info('server'))?.[1] ?? 'unknown';
    r.disconnect();
  }
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    memoryGb: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    redis,
    os: `Linux ${release()}`,
  };
}

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      quick: { type: 'boolean', default: false },
      systems: { type: 'string', default: 'echo,handler,bullmq,memory,redis' },
      idle: { type: 'string' },
      out: { type: 'string', default: 'bench/results' },
      workers: { type: 'string', default: '2' },
      devices: { type: 'string', default: '200' },
      profile: { type: 'string' },
      rates: { type: 'string' },
      seconds: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const base = values.quick ? QUICK : FULL;
  const plan: Plan = { ...base, fixed: false, idle: Number(values.idle ?? (values.quick ? 1000 : 20000)) };
  if (values.rates !== undefined) {
    const rates = values.rates.split(',').map(Number);
    const seconds = Number(values.seconds ?? base.stepS);
    if (!rates.every((r) => Number.isInteger(r) && r > 0) || !(seconds > 0)) {
      process.stderr.write(`--rates takes positive integers (got ${values.rates}), --seconds a positive number\n${USAGE}\n`);
      return 2;
    }
    Object.assign(plan, { fixed: true, ladder: rates, bisections: 0, stepS: seconds });
  }
  const systems = values.systems.split(',').map((s) => s.trim()) as SystemId[];
  const unknown = systems.filter((s) => !SYSTEMS.includes(s));
  if (unknown.length > 0) {
    process.stderr.write(`unknown system ${unknown.join(', ')} (known: ${SYSTEMS.join(', ')})\n${USAGE}\n`);
    return 2;
  }
  const workers = Number(values.workers);
  const devices = Number(values.devices);
  const started = Date.now();

  const upstream = await startUpstream();
  let privateRedis: PrivateRedis | undefined;
  let redisUrl = process.env.REDIS_URL;
  const needsRedis = systems.some((s) => s.startsWith('redis') || s.startsWith('plant') || s === 'bullmq');
  if (needsRedis && !redisUrl) {
    privateRedis = await startPrivateRedis();
    redisUrl = privateRedis.url;
    log(`started redis-server on port ${privateRedis.port}`);
  }
  try {
    const results: BenchResults = {
      startedAt: new Date(started).toISOString(),
      command: `npm run bench${argv.length > 0 ? ` -- ${argv.join(' ')}` : ''}`,
      quick: plan.quick,
      machine: await machine(needsRedis ? redisUrl : undefined),
      upstreamLatencyMs: UPSTREAM_LATENCY_MS,
      p99LimitMs: P99_LIMIT_MS,
      generator: { workers, connections: devices },
      systems: [],
      durationS: 0,
    };
    for (const id of systems) {
      const sut = await startSut(id, upstream, redisUrl ?? '', values.profile);
      try {
        results.systems.push(await measureSystem(sut, plan, upstream, workers, devices));
      } finally {
        await sut.stop();
      }
    }
    if (plan.idle > 0) {
      // Every idle device is a socket in the bridge and one in the generator: both need a descriptor.
      const limit = hardFileLimit();
      const count = Math.min(plan.idle, limit - FD_HEADROOM);
      log(`connecting ${count} idle devices`);
      results.idle = await measureIdle(count, upstream, plan.quick ? 1 : 5, plan.quick ? 5 : 45);
      if (count < plan.idle) {
        results.idle.note = `${plan.idle} were asked for; ${count} tried, because this machine's hard limit on open files is ${limit} per process (\`ulimit -Hn\`).`;
      }
    }
    results.durationS = Math.round((Date.now() - started) / 1000);
    mkdirSync(values.out, { recursive: true });
    writeFileSync(`${values.out}/latest.json`, `${JSON.stringify(results, null, 2)}\n`);
    writeFileSync(`${values.out}/latest.svg`, renderLatencyChart(results));
    writeFileSync(`${values.out}/latest-steps.md`, formatSteps(results));
    process.stdout.write(`${formatReport(results)}\n`);
    log(`wrote ${values.out}/latest.json, latest.svg and latest-steps.md in ${results.durationS} s`);
    return 0;
  } finally {
    upstream.child.kill('SIGTERM');
    await privateRedis?.stop();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
