// Chooses the coordination the configuration asks for: in-process (no REDIS_URL) or one
// Redis shared by every instance, for the bridge's store and the broker's plugins alike.
import { Redis, type RedisOptions } from 'ioredis';
import { createClusterPlugins, type ClusterPlugins, type OpenRedis } from '../broker/cluster.js';
import { ConfigError } from '../contract/index.js';
import { Closers } from './closers.js';
import type { Config } from './config/config.js';
import { newRedis, type RedisEndpoint } from './config/redis-endpoint.js';
import type { Logger } from './logger.js';
import { checkRedisPolicy, checkRedisVersion } from './store/redis-check.js';
import { MemoryReports, RedisReports, type InstanceReports } from './store/instance-reports.js';
import { MemoryStore } from './store/memory.js';
import { RedisStore, type RedisStoreOptions } from './store/redis.js';
import { RedisHealth } from './store/redis-health.js';
import { reportConnection, storeOutage } from './store/outage.js';
import { Presence } from './store/presence.js';
import type { ConditionReport, RepeatingLogOptions } from './repeating-log.js';
import { redisKeys } from './store/redis-keys.js';
import { MemoryScadaState } from './store/memory-scada-state.js';
import { RedisScadaState } from './store/redis-scada-state.js';
import { SCADA_RECORD_MAX_BYTES, type ScadaState, type ScadaStateBounds } from './store/scada-state.js';
import { RedisSessionRegistry } from './store/redis-session-registry.js';
import type { SessionRegistry } from './store/session-registry.js';
import type { DeadLetterBounds, Store } from './store/port.js';

export interface Coordination {
  kind: 'memory' | 'redis';
  store: Store;
  /** For the embedded broker; undefined in memory mode (Aedes' in-process defaults) and with BROKER_URL. */
  plugins: ClusterPlugins | undefined;
  /** The store's Redis connection (redis mode only), for state other parts share, e.g. circuit breakers. */
  redis?: Redis | undefined;
  /** False while Redis is out of reach. */
  healthy(): boolean;
  /** Each instance's latest operator-dashboard report. */
  reports: InstanceReports;
  /** The SCADA outputs' last good answers, Sparkplug bdSeq and lease, and events across instances. */
  scada: ScadaState;
  /** Each instance's sessions on the plant's broker and their liveness (redis mode only: one process has no one to adopt). */
  sessions?: SessionRegistry | undefined;
  /** Redis out of reach, as every part that meets it reports it (one set of lines per outage). */
  outage: ConditionReport;
  /** Bridge instances sharing this queue, this one included; undefined when unknown. */
  instances(): number | undefined;
  /** Closes what the broker does not (the broker closes the plugins). */
  close(): Promise<void>;
}

const CONNECT_TIMEOUT_MS = 10_000;

type DeadLetterVariables = 'dlqMax' | 'dlqMaxBytes' | 'dlqTtlS';
const deadLetterBounds = (config: Pick<Config, DeadLetterVariables>): DeadLetterBounds => ({
  max: config.dlqMax,
  maxBytes: config.dlqMaxBytes,
  ttlS: config.dlqTtlS,
});

type ScadaVariables = 'scadaMaxTags' | 'scadaTagTtlS';
const scadaBounds = (config: Partial<Pick<Config, ScadaVariables>>): ScadaStateBounds => ({
  maxEntries: config.scadaMaxTags ?? 10_000,
  maxRecordBytes: SCADA_RECORD_MAX_BYTES,
  ttlS: config.scadaTagTtlS ?? 604_800,
});

/** One instance on an in-process store (no REDIS_URL, or a store a test supplies). */
export function memoryCoordination(store: Store, config: Partial<Pick<Config, ScadaVariables>> = {}): Coordination {
  const scada = new MemoryScadaState(scadaBounds(config));
  return {
    kind: 'memory',
    store,
    plugins: undefined,
    reports: new MemoryReports(),
    scada,
    healthy: () => true,
    outage: { fail: () => undefined, ok: () => undefined },
    instances: () => 1,
    close: () => scada.close(),
  };
}

export async function openCoordination(
  config: Pick<Config, 'redis' | 'redisPrefix' | 'redisTimeoutMs' | 'redisWaitReplicas' | 'brokerUrl' | 'fairShare' | DeadLetterVariables | ScadaVariables>,
  logger: Logger,
  repeatLog: RepeatingLogOptions = {},
): Promise<Coordination> {
  if (config.redis === undefined) {
    return memoryCoordination(new MemoryStore({ fairShare: config.fairShare, deadLetters: deadLetterBounds(config) }), config);
  }
  const log = logger.child({ module: 'redis' });
  // Every part opened pushes its closer: a step that fails closes what the earlier ones opened, last first.
  const closers = new Closers(log);
  try {
    return await openRedisCoordination({ ...config, redis: config.redis }, log, storeOutage(log, repeatLog), closers);
  } catch (err) {
    await closers.closeAll().catch(() => undefined);
    throw err;
  }
}

type RedisVariables = 'redisPrefix' | 'redisTimeoutMs' | 'redisWaitReplicas' | 'fairShare' | DeadLetterVariables;

async function openRedisCoordination(
  config: Pick<Config, RedisVariables | 'brokerUrl' | ScadaVariables> & { redis: RedisEndpoint },
  log: Logger,
  outage: ConditionReport & { silence(): void },
  closers: Closers,
): Promise<Coordination> {
  const { redis, store, health } = await openRedisStore(config, config.redis, log, outage, closers);
  // Left only once the broker has closed (the stop closes it first): until then other instances must keep publishing through Redis.
  const presence = await joinPresence(config, redis, log, outage);
  closers.push('presence', () => presence.leave());
  // The embedded brokers of a fleet share subscriptions and sessions through Redis; with the
  // plant's broker (BROKER_URL) that broker does it. The broker closes the plugins.
  const plugins =
    config.brokerUrl === undefined ? await createClusterPlugins(openRedis(config.redis), config.redisPrefix, log, { presence, report: outage }) : undefined;
  const scada = new RedisScadaState(redis, { prefix: config.redisPrefix, bounds: scadaBounds(config), logger: log });
  closers.push('scada', () => scada.close());
  // Connections closing from here on are expected.
  closers.push('outage', () => outage.silence());
  return {
    kind: 'redis',
    store,
    plugins,
    redis,
    reports: new RedisReports(redis, redisKeys(config.redisPrefix).reports),
    scada,
    sessions: new RedisSessionRegistry(redis, config.redisPrefix),
    healthy: () => health.healthy(),
    outage,
    instances: () => presence.instances,
    close: () => closers.closeAll(),
  };
}

async function joinPresence(
  config: Pick<Config, 'redisPrefix'> & { redis: RedisEndpoint },
  redis: Redis,
  log: Logger,
  outage: ConditionReport,
): Promise<Presence> {
  const channel = redisKeys(config.redisPrefix).instances;
  try {
    return await Presence.join({
      query: redis,
      openMarker: (options) => newRedis(Redis, config.redis, options),
      channel,
      connectionName: `edge-ai-bridge:${config.redisPrefix}:presence`,
      logger: log,
      report: outage,
    });
  } catch (err) {
    throw new ConfigError('REDIS_URL', `cannot subscribe to ${channel}: ${(err as Error).message}`);
  }
}

/** The broker's way to the same Redis, for the connections its plugins open with their own ioredis. */
const openRedis =
  (endpoint: RedisEndpoint): OpenRedis =>
  (Redis, options) =>
    newRedis(Redis, endpoint, options);

/** Connects, checks the server (version, eviction policy) and moves an older version's keys. */
async function openRedisStore(
  config: Pick<Config, RedisVariables>,
  endpoint: RedisEndpoint,
  log: Logger,
  outage: ConditionReport,
  closers: Closers,
): Promise<{ redis: Redis; store: RedisStore; health: RedisHealth }> {
  const { redisPrefix: prefix, redisTimeoutMs: timeoutMs } = config;
  const connection = (name: string): Redis => {
    const conn = newRedis(Redis, endpoint, connectionOptions(name, timeoutMs));
    closers.push(name, () =>
      conn.quit().then(
        () => undefined,
        () => conn.disconnect(),
      ),
    );
    return conn;
  };
  const redis = connection(`edge-ai-bridge:${prefix}`);
  await connectStore(redis, log, outage);
  await checkServer(redis, log);
  const health = new RedisHealth(redis, timeoutMs, outage);
  await health.start();
  closers.push('redis health', () => health.stop());
  const replicas = await replicasOption(config.redisWaitReplicas, () => connection(`edge-ai-bridge:${prefix}:admissions`), timeoutMs, log, outage);
  const store = new RedisStore(redis, { prefix, health, replicas, fairShare: config.fairShare, deadLetters: deadLetterBounds(config) });
  const moved = await store.upgrade(Date.now());
  if (moved > 0) log.info({ jobs: moved }, "moved the jobs an older version left in Redis to this version's layout");
  return { redis, store, health };
}

async function connectStore(redis: Redis, log: Logger, outage: ConditionReport): Promise<void> {
  let lastError = '';
  redis.on('error', (err: Error) => {
    lastError = err.message;
    outage.fail('store', err);
  });
  // Once: a reconnect is summed up by the outage's end line.
  redis.once('ready', () => log.info('Redis connection ready'));
  redis.on('ready', () => outage.ok('store'));
  try {
    await redis.connect();
  } catch (err) {
    const reason = lastError || (err instanceof Error ? err.message : String(err));
    throw new ConfigError('REDIS_URL', `cannot connect to Redis: ${reason}`);
  }
}

/** A Redis too old for the store's functions, or one that may evict keys, is refused. */
async function checkServer(redis: Redis, log: Logger): Promise<void> {
  const tooOld = await checkRedisVersion(redis).catch(() => undefined);
  if (tooOld) throw new ConfigError('REDIS_URL', tooOld);
  const policy = await checkRedisPolicy(redis);
  // The problem line already names REDIS_URL.
  if (policy.ok === false) throw new ConfigError('REDIS_URL', policy.problem.replace(/^REDIS_URL: /, ''));
  if (policy.ok === 'unknown') log.warn({ reason: policy.reason }, 'cannot read maxmemory-policy; make sure it is noeviction');
}

/** The store's connections: fail fast, time out on a stalled Redis, pipeline what one turn issues. */
function connectionOptions(connectionName: string, timeoutMs: number): RedisOptions {
  return {
    lazyConnect: true,
    connectionName,
    connectTimeout: CONNECT_TIMEOUT_MS,
    // A stalled Redis keeps the socket open: a command it never answers fails after this.
    commandTimeout: timeoutMs,
    // Fail fast while Redis is away: a request gets `unavailable` now rather than hanging.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    retryStrategy: (times) => Math.min(100 * times, 2000),
    // Every request's admit, lead and completion issued in one event-loop turn leave in one
    // write and come back in one read: on loopback the syscalls, not Redis, were the cost.
    enableAutoPipelining: true,
  };
}

/**
 * REDIS_WAIT_REPLICAS as the store's option, with the admissions' own connection (the same
 * settings as the store's); a shortfall is logged at most every 10 s.
 */
async function replicasOption(
  count: number,
  connection: () => Redis,
  timeoutMs: number,
  log: Logger,
  outage: ConditionReport,
): Promise<RedisStoreOptions['replicas']> {
  if (count === 0) return undefined;
  const conn = connection();
  reportConnection(conn, 'admissions', outage);
  await conn.connect();
  let loggedAt = 0;
  let short = 0;
  return {
    count,
    connection: conn,
    // Half the command timeout: the WAIT itself must answer before the connection gives up on it.
    timeoutMs: Math.floor(timeoutMs / 2),
    short(acked) {
      short += 1;
      if (Date.now() - loggedAt < 10_000) return;
      loggedAt = Date.now();
      log.warn(
        { wanted: count, acked, admissions: short },
        'fewer Redis replicas than REDIS_WAIT_REPLICAS confirmed admissions in time: a failover now could lose them',
      );
      short = 0;
    },
  };
}
