// Store benchmark (npm run bench): the full cycle admit → claim → complete for N jobs, per
// Store implementation, with batching off and on, for one instance and for two instances
// sharing one Redis prefix. Prints jobs/s and Redis commands per job (counted on our own
// connections, so other users of a shared Redis do not skew it) plus, as a hint of where
// the time goes, Redis server CPU and EVALSHA cost from INFO (server-wide: approximate on
// a shared Redis).
//
// It only ever touches keys under its own `{bench-<random>-<scenario>}` prefixes and deletes
// them (SCAN MATCH + DEL) after each scenario. It never flushes anything.
//
//   node dist/bench/store-bench.js [--jobs 20000] [--devices 1000] [--claim-max 64]
//     [--inflight 256] [--scenarios a,b,...] [--redis redis://127.0.0.1:6379] [--json]
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { DEFAULT_PRIORITY_OFFSETS_MS } from '../bridge/config/config.js';
import type { InferRequest, Priority, Reply } from '../contract/index.js';
import { MemoryStore } from '../bridge/store/memory.js';
import { deleteDeployment } from '../bridge/store/redis-keys.js';
import { RedisStore } from '../bridge/store/redis.js';
import { jobKey, type AdmitLimits, type ClaimOptions, type Job, type Store } from '../bridge/store/types.js';

// --- options -----------------------------------------------------------------------------

const { values: argv } = parseArgs({
  options: {
    jobs: { type: 'string', default: '20000' },
    devices: { type: 'string', default: '1000' },
    'claim-max': { type: 'string', default: '64' },
    inflight: { type: 'string', default: '256' },
    scenarios: { type: 'string' },
    redis: { type: 'string', default: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
    json: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
    // Internal: a child process serving as one instance of a two-instance scenario.
    worker: { type: 'string' },
  },
});

const positiveInt = (name: string, raw: string | undefined): number => {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) {
    console.error(`--${name} must be a positive integer (got ${String(raw)})`);
    process.exit(2);
  }
  return n;
};

const JOBS = positiveInt('jobs', argv.jobs);
const DEVICES = positiveInt('devices', argv.devices);
const CLAIM_MAX = positiveInt('claim-max', argv['claim-max']);
const INFLIGHT = positiveInt('inflight', argv.inflight);
const REDIS_URL = argv.redis ?? 'redis://127.0.0.1:6379';
const WARMUP_JOBS = 1000;

/** Large enough never to throttle: the benchmark measures the store, not the limits. */
const LIMITS: AdmitLimits = { deviceRpm: 1_000_000_000, queueMax: 1_000_000_000 };
const LEASE_MS = 120_000;
const RATE = { rpm: 1_000_000_000, tpm: 1_000_000_000_000 };
const DONE = { ttlS: 86_400, deadLetter: false };

// --- realistic jobs, built the way intake builds them --------------------------------------

const PRIORITY_MIX: Priority[] = ['critical', ...Array<Priority>(3).fill('high'), ...Array<Priority>(12).fill('normal'), ...Array<Priority>(4).fill('low')];

interface Blueprint {
  deviceId: string;
  priority: Priority;
  request: InferRequest;
  payloadBytes: number;
}

/** The i-th request of a run: a small chat request from one of DEVICES devices. */
function blueprint(i: number): Blueprint {
  const deviceId = `sensor-${String(i % DEVICES).padStart(4, '0')}`;
  const request: InferRequest = {
    id: `req-${i}`,
    model: 'gpt-4o-mini',
    messages: [
      { role: 'system', content: 'You are a concise assistant for an industrial edge device. Answer in one sentence.' },
      {
        role: 'user',
        content: `Motor ${i % 17} reports ${(40 + (i % 30)).toFixed(1)} C and vibration ${((i % 70) / 10).toFixed(1)} mm/s. Is this within the normal operating range?`,
      },
    ],
    max_tokens: 128,
    temperature: 0.2,
    // Half the requests carry a deadline, so the deadlines index is exercised too.
    ...(i % 2 === 0 ? { ttl_ms: 300_000 } : {}),
  };
  return {
    deviceId,
    priority: PRIORITY_MIX[i % PRIORITY_MIX.length] ?? 'normal',
    request,
    payloadBytes: Buffer.byteLength(JSON.stringify(request)),
  };
}

/** As Intake.admit builds a Job at arrival. */
function toJob(b: Blueprint, arrivalMs: number): Job {
  const { request } = b;
  return {
    key: jobKey(b.deviceId, request.id),
    deviceId: b.deviceId,
    id: request.id,
    priority: b.priority,
    request,
    arrivalMs,
    score: arrivalMs + DEFAULT_PRIORITY_OFFSETS_MS[b.priority],
    deadlineMs: request.ttl_ms === undefined ? undefined : arrivalMs + request.ttl_ms,
    tokenEstimate: Math.ceil(b.payloadBytes / 4) + (request.max_tokens ?? 256),
    attempts: 0,
  };
}

/** A plausible upstream answer, as the scheduler completes a job with. */
function replyFor(job: Job, now: number): Reply {
  return {
    id: job.id,
    ok: true,
    model: 'gpt-4o-mini-2024-07-18',
    content: 'Yes: both temperature and vibration are within the normal range for this motor class; no action is needed.',
    finish_reason: 'stop',
    usage: { prompt_tokens: 61, completion_tokens: 24, total_tokens: 85 },
    cached: false,
    attempts: 1,
    priority: job.priority,
    timing: { queued_ms: now - job.arrivalMs, upstream_ms: 412, total_ms: now - job.arrivalMs + 412 },
  };
}

// --- one instance's share of the work ----------------------------------------------------

type Mode = 'serial' | 'batched';

interface Share {
  /** Indices of the jobs this instance admits: first, first + step, ... below total. */
  first: number;
  step: number;
  total: number;
}

interface Coordinator {
  /** Read BEFORE a claim: if true and the claim comes back empty, the shared queue is empty. */
  allAdmitted(): boolean;
  admitsDone(): void;
}

interface InstanceResult {
  admitted: number;
  completed: number;
  claims: number;
  emptyClaims: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function runInstance(store: Store, owner: string, mode: Mode, share: Share, co: Coordinator): Promise<InstanceResult> {
  const r: InstanceResult = { admitted: 0, completed: 0, claims: 0, emptyClaims: 0 };
  const claimMax = mode === 'serial' ? 1 : CLAIM_MAX;
  const claimOptions: ClaimOptions = { owner, max: claimMax, leaseMs: LEASE_MS, rpm: RATE.rpm, tpm: RATE.tpm };

  const admitOne = async (i: number) => {
    const now = Date.now();
    const result = await store.admit(toJob(blueprint(i), now), LIMITS, now);
    if (result.kind !== 'queued') throw new Error(`admit of job ${i} answered ${result.kind}`);
    r.admitted += 1;
  };
  /** One claim and the completion of all it brought; false when it came back empty. */
  const claimAndComplete = async (): Promise<boolean> => {
    const { jobs, expired } = await store.claim(claimOptions, Date.now());
    r.claims += 1;
    const finished = [...jobs, ...expired];
    if (finished.length === 0) {
      r.emptyClaims += 1;
      return false;
    }
    if (mode === 'serial') {
      for (const job of finished) await store.complete(job, replyFor(job, Date.now()), DONE, Date.now());
    } else {
      await Promise.all(finished.map((job) => store.complete(job, replyFor(job, Date.now()), DONE, Date.now())));
    }
    r.completed += finished.length;
    return true;
  };
  /** Claims until every instance has admitted everything and the queue is empty. */
  const consume = async () => {
    for (;;) {
      const admittedBefore = co.allAdmitted();
      if (!(await claimAndComplete())) {
        if (admittedBefore) return;
        await sleep(1);
      }
    }
  };

  if (mode === 'serial') {
    // Batching off: admit one, claim one, complete it; every call awaited in turn.
    for (let i = share.first; i < share.total; i += share.step) {
      await admitOne(i);
      await claimAndComplete();
    }
    co.admitsDone();
    await consume();
    return r;
  }

  // Batching on: INFLIGHT admits in flight, and enough claimers that CLAIM_MAX jobs each make
  // about INFLIGHT completes in flight, all at once on the same connection.
  let next = share.first;
  const producer = Promise.all(
    Array.from({ length: INFLIGHT }, async () => {
      while (next < share.total) {
        const i = next;
        next += share.step;
        await admitOne(i);
      }
    }),
  ).then(() => co.admitsDone());
  const claimers = Math.max(1, Math.round(INFLIGHT / CLAIM_MAX));
  await Promise.all([producer, ...Array.from({ length: claimers }, consume)]);
  return r;
}

// --- measuring -----------------------------------------------------------------------------

interface Counters {
  commands: number;
  writes: number;
}

/** Counts the commands sent and the socket writes (a pipeline is one write) on one connection. */
function countCalls(redis: Redis): Counters {
  const counters: Counters = { commands: 0, writes: 0 };
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = ((...args: Parameters<Redis['sendCommand']>) => {
    counters.commands += 1;
    return send(...args);
  }) as Redis['sendCommand'];
  const stream = (redis as unknown as { stream: NodeJS.WritableStream }).stream;
  const write = stream.write.bind(stream) as (...a: unknown[]) => boolean;
  (stream as unknown as { write: (...a: unknown[]) => boolean }).write = (...a: unknown[]) => {
    counters.writes += 1;
    return write(...a);
  };
  return counters;
}

async function connect(autoPipeline: boolean): Promise<Redis> {
  const redis = new Redis(REDIS_URL, {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    enableAutoPipelining: autoPipeline,
    connectionName: 'edge-ai-bridge:store-bench',
  });
  await redis.connect();
  return redis;
}

/** Server-wide figures from INFO: approximate when others use the same Redis. */
interface ServerSnapshot {
  cpuS: number;
  evalshaCalls: number;
  evalshaUsec: number;
  commands: number;
}

async function serverSnapshot(admin: Redis): Promise<ServerSnapshot> {
  const info = await admin.info('all');
  const num = (re: RegExp) => Number(re.exec(info)?.[1] ?? 0);
  return {
    cpuS: num(/^used_cpu_user_main_thread:([\d.]+)/m) + num(/^used_cpu_sys_main_thread:([\d.]+)/m),
    evalshaCalls: num(/^cmdstat_evalsha:calls=(\d+)/m),
    evalshaUsec: num(/^cmdstat_evalsha:calls=\d+,usec=(\d+)/m),
    commands: num(/^total_commands_processed:(\d+)/m),
  };
}

interface Row {
  scenario: string;
  instances: number;
  mode: Mode;
  autoPipelining: boolean;
  jobs: number;
  seconds: number;
  jobsPerS: number;
  /** Commands our connections sent, per job. */
  redisCallsPerJob: number;
  /** Socket writes (requests on the wire; an auto-pipeline batch is one), per job. */
  writesPerJob: number;
  claims: number;
  emptyClaims: number;
  /** Redis main-thread CPU during the run, as a share of wall time (1 = saturated). */
  redisCpuShare: number | undefined;
  /** Server-side EVALSHA cost (script run time), µs per job. */
  evalshaUsecPerJob: number | undefined;
  /** Node CPU (user + system) of the benchmark's instance processes, as a share of wall time. */
  clientCpuShare: number;
  /** All CPUs of the machine busy during the run (1 = every core saturated; others' load counts too). */
  machineCpuShare: number | undefined;
}

interface Scenario {
  name: string;
  store: 'memory' | 'redis';
  instances: 1 | 2;
  mode: Mode;
  autoPipelining: boolean;
  /** Two instances as two child processes rather than two connections in this process. */
  processes: boolean;
}

const SCENARIOS: Scenario[] = [
  { name: 'memory serial', store: 'memory', instances: 1, mode: 'serial', autoPipelining: false, processes: false },
  { name: 'memory batched', store: 'memory', instances: 1, mode: 'batched', autoPipelining: false, processes: false },
  { name: 'redis x1 serial', store: 'redis', instances: 1, mode: 'serial', autoPipelining: false, processes: false },
  { name: 'redis x1 batched', store: 'redis', instances: 1, mode: 'batched', autoPipelining: false, processes: false },
  { name: 'redis x1 batched+autopipe', store: 'redis', instances: 1, mode: 'batched', autoPipelining: true, processes: false },
  { name: 'redis x2 serial (2 procs)', store: 'redis', instances: 2, mode: 'serial', autoPipelining: false, processes: true },
  { name: 'redis x2 batched (2 procs)', store: 'redis', instances: 2, mode: 'batched', autoPipelining: false, processes: true },
  { name: 'redis x2 batched+autopipe (2 procs)', store: 'redis', instances: 2, mode: 'batched', autoPipelining: true, processes: true },
  { name: 'redis x2 batched+autopipe (1 proc, 2 conns)', store: 'redis', instances: 2, mode: 'batched', autoPipelining: true, processes: false },
];

const slug = (name: string) => name.replace(/[^a-z0-9]+/gi, '-').replace(/^-|-$/g, '').toLowerCase();

const cpuSeconds = (usage: NodeJS.CpuUsage) => (usage.user + usage.system) / 1e6;

/** Busy and total jiffies of the whole machine (Linux /proc/stat); undefined elsewhere. */
function machineTicks(): { busy: number; total: number } | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
    const ticks = line.trim().split(/\s+/).slice(1).map(Number);
    const total = ticks.reduce((a, b) => a + b, 0);
    const idle = (ticks[3] ?? 0) + (ticks[4] ?? 0);
    return { busy: total - idle, total };
  } catch {
    return undefined;
  }
}

/** Share of all CPUs busy between two readings (anything on the machine counts). */
function machineBusy(a: ReturnType<typeof machineTicks>, b: ReturnType<typeof machineTicks>): number | undefined {
  if (!a || !b || b.total === a.total) return undefined;
  return round((b.busy - a.busy) / (b.total - a.total), 2);
}

/** Admit/claim/complete a few jobs under a throwaway prefix: loads the scripts, warms the JIT. */
async function warmUp(redis: Redis, prefix: string, mode: Mode): Promise<void> {
  const store = new RedisStore(redis, { prefix });
  let done = false;
  await runInstance(store, 'warmup', mode, { first: 0, step: 1, total: WARMUP_JOBS }, {
    allAdmitted: () => done,
    admitsDone: () => {
      done = true;
    },
  });
  await deleteDeployment(redis, prefix);
}

async function runInProcess(s: Scenario, prefix: string, admin: Redis | undefined): Promise<Row> {
  const connections: Redis[] = [];
  const stores: Store[] = [];
  if (s.store === 'memory') {
    stores.push(new MemoryStore());
  } else {
    for (let n = 0; n < s.instances; n++) {
      const redis = await connect(s.autoPipelining);
      await warmUp(redis, `${prefix}-warm${n}`, s.mode);
      connections.push(redis);
      stores.push(new RedisStore(redis, { prefix }));
    }
  }
  const counters = connections.map(countCalls);
  let admitting: number = s.instances;
  const co: Coordinator = { allAdmitted: () => admitting === 0, admitsDone: () => void (admitting -= 1) };

  const before = admin ? await serverSnapshot(admin) : undefined;
  const cpu0 = process.cpuUsage();
  const ticks0 = machineTicks();
  const t0 = performance.now();
  const results = await Promise.all(
    stores.map((store, n) => runInstance(store, `bench-${n}`, s.mode, { first: n, step: s.instances, total: JOBS }, co)),
  );
  const seconds = (performance.now() - t0) / 1000;
  const clientCpu = cpuSeconds(process.cpuUsage(cpu0));
  const busy = machineBusy(ticks0, machineTicks());
  const after = admin ? await serverSnapshot(admin) : undefined;

  for (const redis of connections) redis.disconnect();
  return row(s, seconds, results, counters, clientCpu, busy, before, after);
}

interface WorkerTask {
  prefix: string;
  index: number;
  instances: number;
  mode: Mode;
  autoPipelining: boolean;
}

type FromWorker =
  | { type: 'ready' }
  | { type: 'admitted' }
  | { type: 'done'; result: InstanceResult; counters: Counters; cpuS: number }
  | { type: 'error'; message: string };
type ToWorker = { type: 'go' } | { type: 'all-admitted' };

async function runProcesses(s: Scenario, prefix: string, admin: Redis): Promise<Row> {
  const script = fileURLToPath(import.meta.url);
  const children: ChildProcess[] = [];
  const ready: Promise<void>[] = [];
  const done: Promise<FromWorker & { type: 'done' }>[] = [];
  let admitting: number = s.instances;
  for (let index = 0; index < s.instances; index++) {
    const task: WorkerTask = { prefix, index, instances: s.instances, mode: s.mode, autoPipelining: s.autoPipelining };
    const child = fork(script, [
      '--worker', JSON.stringify(task),
      '--jobs', String(JOBS), '--devices', String(DEVICES), '--claim-max', String(CLAIM_MAX),
      '--inflight', String(INFLIGHT), '--redis', REDIS_URL,
    ]);
    children.push(child);
    let onReady = () => {};
    ready.push(new Promise<void>((resolve) => (onReady = resolve)));
    done.push(
      new Promise((resolve, reject) => {
        child.on('exit', (code) => reject(new Error(`worker ${index} exited (${String(code)}) before it finished`)));
        child.on('message', (m: FromWorker) => {
          if (m.type === 'ready') onReady();
          else if (m.type === 'admitted' && --admitting === 0) {
            for (const c of children) c.send({ type: 'all-admitted' } satisfies ToWorker);
          } else if (m.type === 'done') resolve(m);
          else if (m.type === 'error') reject(new Error(`worker ${index}: ${m.message}`));
        });
      }),
    );
  }
  await Promise.all(ready);
  const before = await serverSnapshot(admin);
  const ticks0 = machineTicks();
  const t0 = performance.now();
  for (const c of children) c.send({ type: 'go' } satisfies ToWorker);
  const finished = await Promise.all(done);
  const seconds = (performance.now() - t0) / 1000;
  const busy = machineBusy(ticks0, machineTicks());
  const after = await serverSnapshot(admin);
  await Promise.all(children.map((c) => new Promise((resolve) => (c.exitCode !== null ? resolve(null) : c.once('exit', resolve)))));
  return row(
    s,
    seconds,
    finished.map((f) => f.result),
    finished.map((f) => f.counters),
    finished.reduce((sum, f) => sum + f.cpuS, 0),
    busy,
    before,
    after,
  );
}

async function worker(task: WorkerTask): Promise<void> {
  const send = (m: FromWorker) => process.send?.(m);
  try {
    const redis = await connect(task.autoPipelining);
    await warmUp(redis, `${task.prefix}-warm${task.index}`, task.mode);
    const store = new RedisStore(redis, { prefix: task.prefix });
    const counters = countCalls(redis);
    let allAdmitted = false;
    let go = () => {};
    const started = new Promise<void>((resolve) => (go = resolve));
    process.on('message', (m: ToWorker) => {
      if (m.type === 'go') go();
      else if (m.type === 'all-admitted') allAdmitted = true;
    });
    send({ type: 'ready' });
    await started;
    const cpu0 = process.cpuUsage();
    const result = await runInstance(store, `bench-${task.index}`, task.mode, { first: task.index, step: task.instances, total: JOBS }, {
      allAdmitted: () => allAdmitted,
      admitsDone: () => send({ type: 'admitted' }),
    });
    send({ type: 'done', result, counters: { ...counters }, cpuS: cpuSeconds(process.cpuUsage(cpu0)) });
    redis.disconnect();
    process.disconnect();
  } catch (err) {
    send({ type: 'error', message: err instanceof Error ? err.message : String(err) });
    process.exitCode = 1;
    process.disconnect();
  }
}

function row(
  s: Scenario,
  seconds: number,
  results: InstanceResult[],
  counters: Counters[],
  clientCpuS: number,
  machineBusyShare: number | undefined,
  before: ServerSnapshot | undefined,
  after: ServerSnapshot | undefined,
): Row {
  const sum = <K extends keyof InstanceResult>(k: K) => results.reduce((t, r) => t + r[k], 0);
  const completed = sum('completed');
  if (sum('admitted') !== JOBS || completed !== JOBS) {
    throw new Error(`${s.name}: admitted ${sum('admitted')} and completed ${completed} of ${JOBS} jobs`);
  }
  const commands = counters.reduce((t, c) => t + c.commands, 0);
  const writes = counters.reduce((t, c) => t + c.writes, 0);
  const serverSide = s.store === 'redis' && before && after;
  return {
    scenario: s.name,
    instances: s.instances,
    mode: s.mode,
    autoPipelining: s.autoPipelining,
    jobs: JOBS,
    seconds: round(seconds, 3),
    jobsPerS: Math.round(JOBS / seconds),
    redisCallsPerJob: round(commands / JOBS, 3),
    writesPerJob: round(writes / JOBS, 3),
    claims: sum('claims'),
    emptyClaims: sum('emptyClaims'),
    redisCpuShare: serverSide ? round((after.cpuS - before.cpuS) / seconds, 2) : undefined,
    evalshaUsecPerJob: serverSide ? round((after.evalshaUsec - before.evalshaUsec) / JOBS, 1) : undefined,
    clientCpuShare: round(clientCpuS / seconds, 2),
    machineCpuShare: machineBusyShare,
  };
}

const round = (n: number, digits: number) => Math.round(n * 10 ** digits) / 10 ** digits;

// --- main ----------------------------------------------------------------------------------

async function machine() {
  const cpu = os.cpus()[0]?.model ?? 'unknown';
  let redisVersion = 'n/a';
  try {
    const admin = await connect(false);
    redisVersion = /^redis_version:(\S+)/m.exec(await admin.info('server'))?.[1] ?? 'unknown';
    admin.disconnect();
  } catch {
    // reported as n/a
  }
  return { cpus: os.availableParallelism(), cpu, node: process.version, redis: redisVersion, platform: `${os.platform()} ${os.release()}` };
}

function printTable(rows: Row[]): void {
  const head = ['scenario', 'jobs', 'seconds', 'jobs/s', 'Redis calls/job', 'writes/job', 'empty claims', 'Redis CPU', 'evalsha µs/job', 'client CPU', 'machine CPU'];
  const fmt = (v: number | undefined, suffix = '') => (v === undefined ? '-' : `${v}${suffix}`);
  const body = rows.map((r) => [
    r.scenario,
    String(r.jobs),
    r.seconds.toFixed(3),
    String(r.jobsPerS),
    r.redisCallsPerJob.toFixed(2),
    r.writesPerJob.toFixed(2),
    String(r.emptyClaims),
    r.redisCpuShare === undefined ? '-' : `${Math.round(r.redisCpuShare * 100)}%`,
    fmt(r.evalshaUsecPerJob),
    `${Math.round(r.clientCpuShare * 100)}%`,
    r.machineCpuShare === undefined ? '-' : `${Math.round(r.machineCpuShare * 100)}%`,
  ]);
  const widths = head.map((h, c) => Math.max(h.length, ...body.map((b) => (b[c] ?? '').length)));
  const line = (cells: string[]) =>
    cells.map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join('  ');
  console.log(line(head));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const b of body) console.log(line(b));
}

async function main(): Promise<void> {
  if (argv.help) {
    console.log(`usage: store-bench [--jobs N] [--devices N] [--claim-max N] [--inflight N] [--redis URL] [--json]
       [--scenarios name,...]   scenarios (by slug): ${SCENARIOS.map((s) => slug(s.name)).join(', ')}`);
    return;
  }
  const wanted = argv.scenarios?.split(',').map((x) => x.trim()).filter(Boolean);
  const scenarios = wanted ? SCENARIOS.filter((s) => wanted.some((w) => slug(s.name).includes(slug(w)))) : SCENARIOS;
  if (scenarios.length === 0) throw new Error(`no scenario matches ${String(argv.scenarios)}`);

  const info = await machine();
  const log = (msg: string) => (argv.json ? process.stderr : process.stdout).write(`${msg}\n`);
  log(`store benchmark: ${JOBS} jobs, ${DEVICES} devices, claim max ${CLAIM_MAX} / ${INFLIGHT} in flight when batched`);
  log(`machine: ${info.cpus} CPUs (${info.cpu}), Node ${info.node}, Redis ${info.redis}, ${info.platform}\n`);

  const run = randomBytes(4).toString('hex');
  const admin = scenarios.some((s) => s.store === 'redis') ? await connect(false) : undefined;
  const rows: Row[] = [];
  try {
    for (const s of scenarios) {
      const prefix = `bench-${run}-${slug(s.name)}`;
      try {
        const r = s.processes && admin ? await runProcesses(s, prefix, admin) : await runInProcess(s, prefix, admin);
        rows.push(r);
        log(`  ${s.name}: ${r.jobsPerS} jobs/s`);
      } finally {
        if (admin) {
          await deleteDeployment(admin, prefix);
          for (let n = 0; n < s.instances; n++) await deleteDeployment(admin, `${prefix}-warm${n}`);
        }
      }
    }
  } finally {
    admin?.disconnect();
  }

  if (argv.json) {
    console.log(JSON.stringify({ machine: info, jobs: JOBS, devices: DEVICES, claimMax: CLAIM_MAX, inflight: INFLIGHT, rows }, null, 2));
  } else {
    log('');
    printTable(rows);
  }
}

if (argv.worker !== undefined) {
  await worker(JSON.parse(argv.worker) as WorkerTask);
} else {
  await main().catch((err: unknown) => {
    console.error(err instanceof Error ? err.stack : err);
    process.exitCode = 1;
  });
}
