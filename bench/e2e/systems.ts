// The systems `npm run bench` can compare, one table row each: how to start it, what it is
// called in the report, and whether it needs Redis. Every system is started as its own
// process(es) and stopped after its measurement, so none inherits another's state.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { startServiceProcess, type ServiceProcess } from '../../device-sim/service-process.js';
import { deleteDeployment } from '../../bridge/store/redis-keys.js';
import { startPlant } from '../plant.js';
import { cpuSeconds } from '../proc.js';
import type { SystemId } from '../results.js';
import { distFile } from './console.js';
import { BENCH_QUEUE_WAIT_MS } from './plan.js';
import { redisCounters, type RedisCounters } from './redis-stats.js';
import { shedCounts } from './shed.js';
import type { Upstream } from './upstream.js';

/** A system under test, running. */
export interface Sut {
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
  /** Systems on Redis: the commands Redis has run and the calls it has read so far. */
  redisCommands?: () => Promise<RedisCounters>;
  /** Our bridges: the OVERLOAD_QUEUE_WAIT_MS they run with (0, the default: the guard off). */
  queueWaitMs?: number;
  stop(): Promise<void>;
}

interface StartContext {
  id: SystemId;
  label: string;
  upstream: Upstream;
  redisUrl: string;
  nodeArgs: string[];
  /** Our bridges' OVERLOAD_QUEUE_WAIT_MS. */
  queueWaitMs: number;
}

type Starter = (ctx: StartContext) => Promise<Sut>;

/** Enough concurrent upstream calls for the rates a bridge reaches at the fixed upstream latency; more only makes bursts. */
const MAX_CONCURRENCY = '256';

export function bridgeEnv(upstreamUrl: string, extra: Record<string, string>, queueWaitMs = BENCH_QUEUE_WAIT_MS): Record<string, string> {
  return {
    UPSTREAM_URL: upstreamUrl,
    // Limits a deployment of this size would set: the bench measures the bridge, not its quotas.
    MAX_CONCURRENCY,
    RATE_LIMIT_RPM: '100000000',
    DEVICE_RATE_LIMIT_RPM: '1000000',
    // Past the knee, refuse normal and low work that would wait over a second rather than
    // queue it for many (BENCH_QUEUE_WAIT_MS; 0, off, is the default). A passing step's p99 is
    // well under that, so it never acts there: it only shapes the overload step.
    OVERLOAD_QUEUE_WAIT_MS: String(queueWaitMs),
    // LOG_LEVEL stays at its default (info): per-request lines are debug, as in production.
    ...extra,
    // BENCH_BRIDGE_ENV='{"REDIS_WAIT_REPLICAS":"1"}': a setting to measure, for every bridge.
    ...(JSON.parse(process.env.BENCH_BRIDGE_ENV ?? '{}') as Record<string, string>),
  };
}

/** (a) and (h): bench/echo-server.js, one process on the project's broker, no queue. */
function reference(env: (ctx: StartContext) => Record<string, string>): Starter {
  return async (ctx) => {
    const service = await startServiceProcess(env(ctx), { script: distFile('bench/echo-server.js'), nodeArgs: ctx.nodeArgs });
    const stop = async (): Promise<void> => void (await service.stop());
    return { id: ctx.id, label: ctx.label, role: 'broker', services: [service], ports: [service.mqttPort], cpu: {}, stop };
  };
}

function handlerEnv(ctx: StartContext, threaded: boolean): Record<string, string> {
  return { LOG_LEVEL: 'warn', UPSTREAM_URL: ctx.upstream.url, MAX_CONCURRENCY, ...(threaded ? { HANDLER_THREAD: '1' } : {}) };
}

/** (b): the whole bridge, `npm start` without Redis. */
async function memoryBridge(ctx: StartContext): Promise<Sut> {
  const service = await startServiceProcess(bridgeEnv(ctx.upstream.url, {}, ctx.queueWaitMs), { nodeArgs: ctx.nodeArgs });
  const stop = async (): Promise<void> => void (await service.stop());
  const shed = (): Promise<Record<string, number>> => shedCounts([service]);
  return { id: ctx.id, label: ctx.label, role: 'bridge', services: [service], ports: [service.mqttPort], cpu: {}, shed, queueWaitMs: ctx.queueWaitMs, stop };
}

interface RedisSystem {
  instances: number;
  /** Bridges with BROKER_URL behind a private Mosquitto (bench/plant.ts) instead of embedded brokers. */
  plant?: boolean;
  /** Another server than the bridge (the BullMQ-built one): quieter logs and no shed metric. */
  script?: string;
}

interface Deployment {
  services: ServiceProcess[];
  ports: number[];
  cpu: Record<string, () => number>;
  stop(): Promise<void>;
}

async function deploy(ctx: StartContext, kind: RedisSystem, env: Record<string, string>, prefix: string): Promise<Deployment> {
  if (kind.plant) {
    const plant = await startPlant({ instances: kind.instances, env, name: `${prefix}-bridge`, nodeArgs: ctx.nodeArgs });
    return { services: plant.services, ports: plant.ports, cpu: { mosquitto: () => cpuSeconds(plant.mosquitto.pid) }, stop: () => plant.stop() };
  }
  const services: ServiceProcess[] = [];
  for (let i = 0; i < kind.instances; i += 1) {
    const options = { nodeArgs: ctx.nodeArgs, ...(kind.script ? { script: distFile(kind.script) } : {}) };
    services.push(await startServiceProcess(kind.script ? { ...env, LOG_LEVEL: 'warn' } : env, options));
  }
  const stop = async (): Promise<void> => void (await Promise.all(services.map((s) => s.stop())));
  return { services, ports: services.map((s) => s.mqttPort), cpu: {}, stop };
}

/** Redis' own CPU counters from INFO, polled, so a Redis the bench did not start is measured too. */
async function pollRedisCpu(admin: Redis): Promise<{ read: () => number; stop: () => void }> {
  let cpu = 0;
  const sample = async (): Promise<void> => {
    const info = await admin.info('cpu');
    const field = (name: string): number => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0);
    cpu = field('used_cpu_user') + field('used_cpu_sys');
  };
  await sample();
  const timer = setInterval(() => void sample().catch(() => undefined), 250);
  return { read: () => cpu, stop: () => clearInterval(timer) };
}

/** (q), (c), (d), (p): on one Redis under a fresh prefix, deleted when the system stops. */
function onRedis(kind: RedisSystem): Starter {
  return async (ctx) => {
    const prefix = `bench-${randomBytes(4).toString('hex')}`;
    const env = bridgeEnv(ctx.upstream.url, { REDIS_URL: ctx.redisUrl, REDIS_PREFIX: prefix }, ctx.queueWaitMs);
    const deployment = await deploy(ctx, kind, env, prefix);
    const admin = new Redis(ctx.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await admin.connect();
    const redisCpu = await pollRedisCpu(admin);
    const { services } = deployment;
    return {
      id: ctx.id,
      label: ctx.label,
      role: 'bridge',
      services,
      ports: deployment.ports,
      cpu: { redis: redisCpu.read, ...deployment.cpu },
      ...(kind.script ? {} : { shed: () => shedCounts(services), queueWaitMs: ctx.queueWaitMs }),
      redisCommands: () => redisCounters(admin),
      async stop() {
        redisCpu.stop();
        await deployment.stop();
        await deleteDeployment(admin, prefix);
        admin.disconnect();
      },
    };
  };
}

interface SystemDef {
  label: string;
  redis: boolean;
  start: Starter;
}

/** In the order `--systems` lists them when one is unknown. */
const TABLE: Record<SystemId, SystemDef> = {
  echo: { label: '(a) MQTT echo', redis: false, start: reference(() => ({ LOG_LEVEL: 'warn' })) },
  handler: { label: '(h) bare handler', redis: false, start: reference((ctx) => handlerEnv(ctx, false)) },
  'handler-thread': { label: '(h2) handler, HTTP in a worker thread', redis: false, start: reference((ctx) => handlerEnv(ctx, true)) },
  bullmq: { label: '(q) BullMQ bridge', redis: true, start: onRedis({ instances: 1, script: 'bench/bullmq-server.js' }) },
  memory: { label: '(b) bridge + memory', redis: false, start: memoryBridge },
  redis: { label: '(c) bridge + Redis', redis: true, start: onRedis({ instances: 1 }) },
  'redis-x2': { label: '(d) 2 bridges + Redis', redis: true, start: onRedis({ instances: 2 }) },
  'plant-x1': { label: '(p1) Mosquitto + 1 bridge + Redis', redis: true, start: onRedis({ instances: 1, plant: true }) },
  'plant-x2': { label: '(p2) Mosquitto + 2 bridges + Redis', redis: true, start: onRedis({ instances: 2, plant: true }) },
  'plant-x3': { label: '(p3) Mosquitto + 3 bridges + Redis', redis: true, start: onRedis({ instances: 3, plant: true }) },
};

export const SYSTEMS = Object.keys(TABLE) as SystemId[];

export const needsRedis = (id: SystemId): boolean => TABLE[id].redis;

/** `queueWaitMs`: our bridges' OVERLOAD_QUEUE_WAIT_MS (default BENCH_QUEUE_WAIT_MS). */
export function startSut(id: SystemId, upstream: Upstream, redisUrl: string, profileDir: string | undefined, queueWaitMs = BENCH_QUEUE_WAIT_MS): Promise<Sut> {
  const nodeArgs = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
  return TABLE[id].start({ id, label: TABLE[id].label, upstream, redisUrl, nodeArgs, queueWaitMs });
}
