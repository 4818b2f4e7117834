// Chooses the coordination the configuration asks for: in-process (no REDIS_URL) or one
// Redis shared by every instance, for the bridge's store and the broker's plugins alike.
import { Redis, type RedisOptions } from 'ioredis';
import { createClusterPlugins, type ClusterPlugins, type OpenRedis } from '../broker/cluster.js';
import { ConfigError } from '../contract/index.js';
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
import type { DeadLetterBounds, Store } from './store/types.js';

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
  const outage = storeOutage(log, repeatLog);
  const { redis, store, health, admissions } = await openRedisStore(config, config.redis, log, outage);
  const disconnect = (): void => {
    health.stop();
    admissions?.disconnect();
    redis.disconnect();
  };

  const channel = redisKeys(config.redisPrefix).instances;
  let presence: Presence;
  try {
    presence = await Presence.join({
      query: redis,
      redis: config.redis,
      channel,
      connectionName: `edge-ai-bridge:${config.redisPrefix}:presence`,
      logger: log,
      report: outage,
    });
  } catch (err) {
    disconnect();
    throw new ConfigError('REDIS_URL', `cannot subscribe to ${channel}: ${(err as Error).message}`);
  }
  // The embedded brokers of a fleet share subscriptions and sessions through Redis; with the
  // plant's broker (BROKER_URL) that broker does it.
  let plugins: ClusterPlugins | undefined;
  try {
    if (config.brokerUrl === undefined) plugins = await createClusterPlugins(openRedis(config.redis), config.redisPrefix, log, { presence, report: outage });
  } catch (err) {
    await presence.leave();
    disconnect();
    throw err;
  }
  const scada = new RedisScadaState(redis, { prefix: config.redisPrefix, bounds: scadaBounds(config), logger: log });
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
    async close() {
      // Connections closing now are expected.
      outage.silence();
      await scada.close();
      // Only now, with the broker closed: until then other instances must keep publishing through Redis.
      await presence.leave();
      health.stop();
      await admissions?.quit().catch(() => admissions.disconnect());
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/** The broker's way to the same Redis, for the connections its plugins open with their own ioredis. */
const openRedis =
  (endpoint: RedisEndpoint): OpenRedis =>
  (Redis, options) =>
    newRedis(Redis, endpoint, options);

/** Connects, checks the server (version, eviction policy) and moves an older version's keys. */
async function openRedisStore(
  config: Pick<Config, 'redisPrefix' | 'redisTimeoutMs' | 'redisWaitReplicas' | 'fairShare' | DeadLetterVariables>,
  endpoint: RedisEndpoint,
  log: Logger,
  outage: ConditionReport,
): Promise<{ redis: Redis; store: RedisStore; health: RedisHealth; admissions: Redis | undefined }> {
  const { redisPrefix: prefix, redisTimeoutMs: timeoutMs } = config;
  const connection = (name: string): Redis => newRedis(Redis, endpoint, connectionOptions(name, timeoutMs));
  const redis = connection(`edge-ai-bridge:${prefix}`);
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
    redis.disconnect();
    const reason = lastError || (err instanceof Error ? err.message : String(err));
    throw new ConfigError('REDIS_URL', `cannot connect to Redis: ${reason}`);
  }
  const tooOld = await checkRedisVersion(redis).catch(() => undefined);
  if (tooOld) {
    redis.disconnect();
    throw new ConfigError('REDIS_URL', tooOld);
  }
  const policy = await checkRedisPolicy(redis);
  if (policy.ok === false) {
    redis.disconnect();
    // The problem line already names REDIS_URL.
    throw new ConfigError('REDIS_URL', policy.problem.replace(/^REDIS_URL: /, ''));
  }
  if (policy.ok === 'unknown') log.warn({ reason: policy.reason }, 'cannot read maxmemory-policy; make sure it is noeviction');
  const health = new RedisHealth(redis, timeoutMs, outage);
  await health.start();
  let replicas: RedisStoreOptions['replicas'];
  let moved: number;
  let store: RedisStore;
  try {
    replicas = await replicasOption(config.redisWaitReplicas, () => connection(`edge-ai-bridge:${prefix}:admissions`), timeoutMs, log, outage);
    store = new RedisStore(redis, { prefix, health, replicas, fairShare: config.fairShare, deadLetters: deadLetterBounds(config) });
    moved = await store.upgrade(Date.now());
  } catch (err) {
    health.stop();
    replicas?.connection.disconnect();
    redis.disconnect();
    throw err;
  }
  if (moved > 0) log.info({ jobs: moved }, 'moved the jobs an older version left in Redis to this version\'s layout');
  return { redis, store, health, admissions: replicas?.connection };
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
      log.warn({ wanted: count, acked, admissions: short }, 'fewer Redis replicas than REDIS_WAIT_REPLICAS confirmed admissions in time: a failover now could lose them');
      short = 0;
    },
  };
}
