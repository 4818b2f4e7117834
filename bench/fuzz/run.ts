// One fuzzing run: a baseline with the innocent device alone, the attack (attackers in a
// worker thread), then a drain in which the bridge's TTLs lapse; the evidence, judged.
import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { redisKeys } from '../../bridge/store/redis-keys.js';
import type { Kind } from './inputs/actions.js';
import { Innocent, type Phase } from './innocent.js';
import { judge, type Judged } from './oracles.js';
import { phases, type FuzzOptions } from './options.js';
import { Probes } from './probes.js';
import { keyFamily, type RedisSample } from './redis-sample.js';
import { INNOCENT_ID, startScene, TEMPLATES, type Scene } from './scene.js';
import type { StatsByKind, WorkerInit, WorkerReport } from './worker.js';

export interface FuzzReport extends Judged {
  seed: number;
  options: FuzzOptions;
  phasesMs: ReturnType<typeof phases>;
  iterations: StatsByKind;
  /** What the attackers got back on their own result topics, by code. */
  attackerReplies: Record<string, number>;
  /** Second replies to one of the innocent device's requests (allowed: at least once). */
  innocentRepeatedReplies: number;
  kinds: readonly Kind[];
  redis: { before: RedisSample; maxDuring: { keys: number; bytes: number }; after: RedisSample };
  gatewayRefusals: Record<string, number>;
  bridgeLogLines: number;
  bridgeWarnings: Record<string, number>;
  maxLoopDelayP99Ms: number;
  bridgeStderr: string;
  passed: boolean;
}

/** dist/bench/fuzz/worker.js, whether this module runs from dist or from source. */
function workerScript(): string {
  for (const rel of ['./worker.js', '../../dist/bench/fuzz/worker.js']) {
    const path = fileURLToPath(new URL(rel, import.meta.url));
    if (path.includes('/dist/') && existsSync(path)) return path;
  }
  throw new Error('dist/bench/fuzz/worker.js is missing: run `npm run build` first');
}

class AttackThread {
  stats: StatsByKind = {};
  replies: Record<string, number> = {};
  private readonly worker: Worker;
  private readonly done: Promise<void>;

  constructor(init: WorkerInit) {
    this.worker = new Worker(workerScript(), { workerData: init });
    this.done = new Promise((resolve) => {
      this.worker.on('message', (report: WorkerReport) => {
        this.stats = report.stats;
        this.replies = report.replies;
        if (report.final) resolve();
      });
      this.worker.on('exit', () => resolve());
      this.worker.on('error', (err) => {
        process.stderr.write(`fuzz: attacker thread failed: ${err.stack ?? err.message}\n`);
        resolve();
      });
    });
  }

  async stop(): Promise<void> {
    this.worker.postMessage('stop');
    await Promise.race([this.done, sleep(20_000)]);
    await this.worker.terminate();
  }
}

const WARMUP_MS = 3000;

const progress = (line: string): boolean => process.stderr.write(`fuzz: ${line}\n`);

/** Waits `ms`, or less if the bridge exits first. */
async function phase(scene: Scene, ms: number): Promise<void> {
  await Promise.race([sleep(ms), scene.service.exited]);
}

function reporter(scene: Scene, innocent: Innocent, probes: Probes, attack: () => AttackThread | undefined): NodeJS.Timeout {
  const started = Date.now();
  return setInterval(() => {
    const answered = [...innocent.requests.values()].filter((r) => r.latencyMs !== undefined);
    const recent = answered.slice(-10).map((r) => r.latencyMs as number);
    const iterations = Object.values(attack()?.stats ?? {}).reduce((sum, s) => sum + s.iterations, 0);
    const redis = probes.log.redis[probes.log.redis.length - 1];
    progress(
      `+${Math.round((Date.now() - started) / 1000)} s ${innocent.phase}: innocent ${answered.length}/${innocent.requests.size} answered, last 10 max ${Math.max(0, ...recent)} ms; ` +
        `${iterations} attack iterations; Redis ${redis?.keys ?? '?'} keys ${redis ? Math.round(redis.bytes / 1024) : '?'} KiB; ${scene.takeLogLines()} bridge log lines`,
    );
  }, 10_000);
}

interface Run {
  options: FuzzOptions;
  lengths: ReturnType<typeof phases>;
  scene: Scene;
  innocent: Innocent;
  probes: Probes;
  attack: AttackThread;
  before: RedisSample;
  after: RedisSample;
}

function report(run: Run): FuzzReport {
  const { options, scene, innocent, probes, attack, before, after } = run;
  const exited = scene.service.child.exitCode ?? scene.service.child.signalCode;
  const keys = redisKeys(scene.prefix);
  const judged = judge({
    requests: [...innocent.requests.values()],
    foreignReplies: innocent.foreignReplies,
    endedAt: Date.now(),
    exitCode: exited === null ? 'running' : (exited as number),
    probes: probes.log,
    before,
    after,
    iterations: attack.stats,
    attackerReplies: attack.replies,
    kinds: options.kinds,
    attackers: options.attackers,
    dlqMax: Number(scene.env.DLQ_MAX),
    dlqMaxBytes: Number(scene.env.DLQ_MAX_BYTES),
    dlqKeys: [keys.dlqIndex, keys.dlqEntries],
    family: (key) => keyFamily(key, keys.base),
  });
  const during = probes.log.redis.filter((s) => s.atMs > before.atMs && s.atMs < after.atMs);
  return {
    ...judged,
    seed: options.seed,
    options,
    phasesMs: run.lengths,
    iterations: attack.stats,
    attackerReplies: attack.replies,
    innocentRepeatedReplies: innocent.repeatedReplies,
    kinds: options.kinds,
    redis: { before, maxDuring: { keys: Math.max(0, ...during.map((s) => s.keys)), bytes: Math.max(0, ...during.map((s) => s.bytes)) }, after },
    gatewayRefusals: { ...scene.gateway.refused },
    bridgeLogLines: scene.logLines(),
    bridgeWarnings: scene.warnings(),
    maxLoopDelayP99Ms: probes.log.maxLoopDelayP99Ms,
    bridgeStderr: scene.service.stderr().slice(-2000),
    passed: judged.oracles.every((o) => o.pass),
  };
}

/** The phases, in order; resolves with what a report needs. */
async function phasesOf(options: FuzzOptions, scene: Scene, innocent: Innocent, probes: Probes, started: (attack: AttackThread) => void): Promise<Run> {
  const lengths = phases(options);
  const setPhase = (p: Phase): void => {
    innocent.phase = p;
    progress(`${p} from now`);
  };
  probes.start();
  innocent.start();
  await phase(scene, WARMUP_MS);
  setPhase('baseline');
  await phase(scene, lengths.baselineMs);
  const before = await probes.fullSample();
  setPhase('attack');
  const attack = new AttackThread({
    port: scene.service.mqttPort,
    seed: options.seed,
    attackers: options.attackers,
    rate: options.rate,
    kinds: options.kinds,
    context: {
      innocent: INNOCENT_ID,
      maxPayloadBytes: Number(scene.env.MAX_PAYLOAD_BYTES),
      imageMaxBytes: Number(scene.env.IMAGE_MAX_BYTES),
      templates: TEMPLATES,
    },
  });
  started(attack);
  await phase(scene, lengths.attackMs);
  await attack.stop();
  setPhase('drain');
  await phase(scene, lengths.drainMs);
  innocent.stopSending();
  for (let i = 0; i < 20 && innocent.unanswered() > 0 && scene.service.child.exitCode === null; i += 1) await sleep(500);
  const after = await probes.fullSample().catch(() => before);
  await probes.stop();
  return { options, lengths, scene, innocent, probes, attack, before, after };
}

export async function runFuzz(options: FuzzOptions): Promise<FuzzReport> {
  const lengths = phases(options);
  progress(
    `seed ${options.seed}, ${options.attackers} attackers at ${options.rate}/s, baseline ${lengths.baselineMs / 1000} s, attack ${lengths.attackMs / 1000} s, drain ${lengths.drainMs / 1000} s`,
  );
  const scene = await startScene(options.redisUrl, options.ttlS, options.seed);
  let attack: AttackThread | undefined;
  const probes = new Probes(scene.service.httpPort, scene.redis, scene.prefix);
  const innocent = await Innocent.connect(scene.service.mqttPort).catch(async (err: unknown) => {
    await scene.stop();
    throw err;
  });
  const ticker = reporter(scene, innocent, probes, () => attack);
  try {
    return report(await phasesOf(options, scene, innocent, probes, (a) => (attack = a)));
  } finally {
    clearInterval(ticker);
    await probes.stop();
    await attack?.stop().catch(() => undefined);
    await innocent.close();
    await scene.stop();
  }
}
