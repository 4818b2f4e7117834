// Two-instance scenarios as two child processes, each with its own connection and RedisStore
// on one shared prefix, as two bridge instances would run: the parent starts them together
// and times them from "go" to both finishing; each child runs `worker`.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { RedisStore } from '../../bridge/store/redis.js';
import { warmUp } from './in-process.js';
import { runInstance, type InstanceResult, type Mode } from './instance.js';
import { connect, countCalls, cpuSeconds, machineBusy, machineTicks, serverSnapshot, type Counters } from './meters.js';
import { FAIR_SHARE, sizeArgs, type Sizes } from './options.js';
import { toRow, type Row, type Scenario } from './scenarios.js';

export interface WorkerTask {
  prefix: string;
  index: number;
  instances: number;
  mode: Mode;
  autoPipelining: boolean;
}

type Done = { type: 'done'; result: InstanceResult; counters: Counters; cpuS: number };
type FromWorker = { type: 'ready' } | { type: 'admitted' } | Done | { type: 'error'; message: string };
type ToWorker = { type: 'go' } | { type: 'all-admitted' };

/** The benchmark's entry point, which runs `worker` when given --worker. */
const ENTRY = fileURLToPath(new URL('../store-bench.js', import.meta.url));

interface Child {
  process: ChildProcess;
  ready: Promise<void>;
  done: Promise<Done>;
}

function spawnWorker(task: WorkerTask, sizes: Sizes, onAdmitted: () => void): Child {
  const child = fork(ENTRY, ['--worker', JSON.stringify(task), ...sizeArgs(sizes)]);
  let onReady = () => {};
  const ready = new Promise<void>((resolve) => (onReady = resolve));
  const done = new Promise<Done>((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`worker ${task.index} exited (${String(code)}) before it finished`)));
    child.on('message', (m: FromWorker) => {
      if (m.type === 'ready') onReady();
      else if (m.type === 'admitted') onAdmitted();
      else if (m.type === 'done') resolve(m);
      else if (m.type === 'error') reject(new Error(`worker ${task.index}: ${m.message}`));
    });
  });
  return { process: child, ready, done };
}

const exited = (c: ChildProcess) => new Promise((resolve) => (c.exitCode !== null ? resolve(null) : c.once('exit', resolve)));

export async function runProcesses(s: Scenario, prefix: string, admin: Redis, sizes: Sizes): Promise<Row> {
  const children: Child[] = [];
  let admitting: number = s.instances;
  // Once every instance has admitted its share, an empty claim means the shared queue is empty.
  const onAdmitted = () => {
    if (--admitting === 0) for (const c of children) c.process.send({ type: 'all-admitted' } satisfies ToWorker);
  };
  for (let index = 0; index < s.instances; index++) {
    const task: WorkerTask = { prefix, index, instances: s.instances, mode: s.mode, autoPipelining: s.autoPipelining };
    children.push(spawnWorker(task, sizes, onAdmitted));
  }
  await Promise.all(children.map((c) => c.ready));
  const before = await serverSnapshot(admin);
  const ticks0 = machineTicks();
  const t0 = performance.now();
  for (const c of children) c.process.send({ type: 'go' } satisfies ToWorker);
  const finished = await Promise.all(children.map((c) => c.done));
  const seconds = (performance.now() - t0) / 1000;
  const machineBusyShare = machineBusy(ticks0, machineTicks());
  const after = await serverSnapshot(admin);
  await Promise.all(children.map((c) => exited(c.process)));
  return toRow(s, sizes.jobs, {
    seconds,
    results: finished.map((f) => f.result),
    counters: finished.map((f) => f.counters),
    clientCpuS: finished.reduce((sum, f) => sum + f.cpuS, 0),
    machineBusyShare,
    before,
    after,
  });
}

/** The child's side: warm up, report ready, run its share on "go", report its counts. */
export async function worker(task: WorkerTask, sizes: Sizes): Promise<void> {
  const send = (m: FromWorker) => process.send?.(m);
  try {
    const redis = await connect(sizes.redisUrl, task.autoPipelining);
    await warmUp(redis, `${task.prefix}-warm${task.index}`, task.mode, sizes);
    const store = new RedisStore(redis, { prefix: task.prefix, fairShare: FAIR_SHARE });
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
    const share = { first: task.index, step: task.instances, total: sizes.jobs };
    const result = await runInstance(
      store,
      `bench-${task.index}`,
      task.mode,
      share,
      { allAdmitted: () => allAdmitted, admitsDone: () => send({ type: 'admitted' }) },
      sizes,
    );
    send({ type: 'done', result, counters: { ...counters }, cpuS: cpuSeconds(process.cpuUsage(cpu0)) });
    redis.disconnect();
    process.disconnect();
  } catch (err) {
    send({ type: 'error', message: err instanceof Error ? err.message : String(err) });
    process.exitCode = 1;
    process.disconnect();
  }
}
