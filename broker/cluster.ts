// Aedes' own Redis plugins, so that several broker instances act as one:
// - mqemitter-redis carries every PUBLISH between instances (a reply published by the
//   instance that ran the job reaches the device on whichever instance it is connected to).
//   The publishing instance delivers to its own devices itself, at once, and drops its own
//   publishes when Redis sends them back (deliverHereFirst): a reply to a device connected here
//   never waits for, or depends on, Redis pub/sub;
// - aedes-persistence-redis keeps persistent sessions (clean=false), their subscriptions and
//   their queued QoS 1/2 messages in Redis, so they outlive a restart of any instance.
//
// Everything one deployment writes is namespaced by its prefix, as the hash tag `{prefix}`
// that the Redis store's keys carry too (bridge/store/redis-keys.ts):
// - pub/sub channels: mqemitter-redis' MQEmitterRedisPrefix puts `{prefix}:mqtt/` in front of
//   every topic (channel `{prefix}:mqtt/devices/cam-1/result`). Redis pub/sub ignores the
//   database number, so this prefix is the only thing that keeps two deployments (or two
//   parallel tests) on one Redis from receiving each other's messages.
// - keys: aedes-persistence-redis has no prefix option, but it sends every command through
//   the ioredis connection we give it (`conn`), and ioredis' `keyPrefix` prefixes every key
//   argument. Its keys, all under `{prefix}:aedes:`, are:
//     clients                        set of client ids with persistent subscriptions
//     client:{clientId}              hash topic → subscription
//     outgoing:{clientId}            list of queued packet keys for that client
//     packet:{brokerId}:{counter}    a queued packet, and `…:offlineCount` its reference count
//     outgoing:{clientId}:{brokerId}:{counter}   a QoS 2 packet awaiting PUBCOMP
//     incoming:{clientId}:{messageId}            an inbound QoS 2 packet awaiting PUBREL
//     retained                       hash topic → retained message
//     will, will:{brokerId}:{clientId}           stored wills
//   and, ours (sessions-redis.ts), the register of persistent sessions with their expiry:
//     bridge:sessions                zset client id → when its session expires (ms)
//     bridge:device:{deviceId}       set of the device's persistent client ids
//   A queued packet gets a Redis expiry from its own (bounded-persistence.ts stamps one on each).
//   (its own Redis Cluster mode scans unprefixed key patterns, so we never enable it; with
//   the hash tag all these keys share one slot, so its multi-key MSET/DEL work on a cluster.)
//
// Both plugins use the ioredis they depend on (5.x), not the project's ioredis 6, because
// that is the one they are tested with; we load it from the plugin's own location.
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import type { EventEmitter } from 'node:events';
import createPersistence from 'aedes-persistence-redis';
import mqemitterRedis from 'mqemitter-redis';
import type { Logger } from 'pino';
import { MQ_CONCURRENCY } from './emitter.js';
import { reportConnection, warnEach, type ConnectionReport } from './connection-report.js';
import type { SessionBackend } from './session-backend.js';
import { RedisSessions, type ScriptedRedis } from './sessions-redis.js';

export interface ClusterPlugins {
  /** Aedes' `mq` option (an MQEmitterRedisPrefix). */
  readonly mq: unknown;
  /** Aedes' `persistence` option (aedes-persistence-redis). */
  readonly persistence: unknown;
  /** The bounds on persistent sessions, over the persistence's keys. */
  readonly sessions: SessionBackend;
  /** Where failures for Redis go: the connections' own, and the session sweeper's. */
  readonly report: ConnectionReport;
  /** Destroys the persistence, closes the emitter (if Aedes has not) and their connections. Idempotent. */
  close(): Promise<void>;
}

export interface ClusterPluginOptions {
  /** How long to wait for the Redis connections at start (default 10 s). */
  connectTimeoutMs?: number;
  /** Whether this instance is alone on the Redis: then publishes skip Redis (the bridge's store/presence.ts). */
  presence?: { readonly alone: boolean };
  /** Where the connections' errors and recoveries go (default: each error a warning). */
  report?: ConnectionReport;
}

/** The subset of an ioredis 5 connection used here. */
interface RedisConnection extends EventEmitter {
  readonly status: string;
  quit(): Promise<unknown>;
  disconnect(): void;
}
type RedisConstructor = { new (url: string, options: object): RedisConnection; new (options: object): RedisConnection };

/**
 * Opens a connection of the given ioredis class (each plugin brings its own) to the
 * deployment's Redis, wherever it is (a URL, or a primary that Sentinel names): the bridge's
 * newRedis.
 */
export type OpenRedis = <T>(Redis: { new (url: string, options: object): T; new (options: object): T }, options: object) => T;

type Message = { topic: string } & Record<string, unknown>;
/** The subset of an MQEmitterRedis used here. */
interface RedisEmitter {
  readonly state: EventEmitter;
  emit(packet: Message, done?: (err?: Error) => void): unknown;
  /** Private: how it hands a message received from Redis to its subscribers (deliverHereFirst). */
  _emit?: (packet: Message, done?: (err?: Error) => void) => unknown;
  close(callback: () => void): void;
}
type Emit = RedisEmitter['emit'];
type PrefixedEmitterConstructor = new (prefix: string, options: Record<string, unknown>) => RedisEmitter;

/**
 * Characters that are neither Redis glob specials (`* ? [ ] \`, the emitter psubscribes to
 * `{prefix}:mqtt/*` patterns), nor MQTT specials (`+ # /`), nor hash-tag braces.
 */
const PREFIX = /^[A-Za-z0-9_.:-]{1,64}$/;

const require = createRequire(import.meta.url);
const loadRedisFor = (pluginPath: string): RedisConstructor => createRequire(require.resolve(pluginPath))('ioredis') as RedisConstructor;

export async function createClusterPlugins(openRedis: OpenRedis, prefix: string, logger: Logger, options: ClusterPluginOptions = {}): Promise<ClusterPlugins> {
  if (!PREFIX.test(prefix)) throw new Error(`Redis prefix ${JSON.stringify(prefix)} must be 1 to 64 characters of A-Za-z0-9_.:-`);
  const tag = `{${prefix}}`;
  const log = logger.child({ module: 'broker-cluster' });
  const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  const report = options.report ?? warnEach(log, 'Redis connection error');

  const MqRedis = loadRedisFor('mqemitter-redis');
  const PersistenceRedis = loadRedisFor('aedes-persistence-redis');
  const connections: RedisConnection[] = [];
  const connect = (Redis: RedisConstructor, name: string, extra: Record<string, unknown> = {}): RedisConnection => {
    const conn = openRedis(Redis, { connectionName: `${prefix}:${name}`, ...extra });
    reportConnection(conn, name, report);
    connections.push(conn);
    return conn;
  };

  const pubConn = connect(MqRedis, 'mq-pub', { enableAutoPipelining: true });
  const subConn = connect(MqRedis, 'mq-sub');
  const dbConn = connect(PersistenceRedis, 'aedes', { keyPrefix: `${tag}:aedes:` });
  try {
    await Promise.all(connections.map((conn) => ready(conn, connectTimeoutMs)));
  } catch (err) {
    for (const conn of connections) conn.disconnect();
    throw new Error(`REDIS_URL: cannot connect to Redis for the MQTT broker: ${(err as Error).message}`, { cause: err });
  }

  const MQEmitterRedisPrefix = (mqemitterRedis as unknown as { MQEmitterRedisPrefix?: PrefixedEmitterConstructor }).MQEmitterRedisPrefix;
  if (typeof MQEmitterRedisPrefix !== 'function') throw new Error('mqemitter-redis has no MQEmitterRedisPrefix export');
  const mq = new MQEmitterRedisPrefix(`${tag}:mqtt/`, {
    pubConn,
    subConn,
    concurrency: MQ_CONCURRENCY,
    matchEmptyLevels: true, // [MQTT-4.7.1-3]: `a/#` matches `a`
  });
  deliverHereFirst(mq, `${tag}:mqtt/`, options.presence);
  // The emitter re-emits its connections' errors on `state` (reported above); with no
  // listener that event would throw.
  mq.state.on('error', (err: Error) => log.debug({ err: err.message }, 'MQTT emitter Redis error'));

  const persistence: createPersistence.RedisPersistence = createPersistence({
    conn: dbConn,
    packetTTL: secondsLeft,
    // A reconnecting session gets its whole queue: MAX_OFFLINE_MESSAGES bounds it.
    maxSessionDelivery: -1,
  });
  const sessions = new RedisSessions(dbConn as unknown as ScriptedRedis, `${tag}:aedes:`);

  let closing: Promise<void> | undefined;
  return {
    mq,
    persistence,
    sessions,
    report,
    close() {
      closing ??= (async () => {
        // Aedes' close() already closed the emitter (QUIT on both its connections); this
        // covers a broker that never started.
        await new Promise<void>((resolve) => mq.close(resolve));
        // QUIT first: the persistence's destroy() would drop the connection at once, losing
        // any write still queued on it.
        await Promise.all(connections.map((conn) => quit(conn)));
        // Now only marks it destroyed (its `$SYS/sub/+` listener went with the emitter);
        // throws if Aedes never ran setup().
        await persistence.destroy().catch((err: unknown) => log.debug({ err }, 'persistence destroy'));
      })();
      return closing;
    },
  };
}

/** A queued packet's Redis expiry: what is left of its own (0, none, for a packet without one). */
function secondsLeft(packet: unknown): number {
  const expiry = (packet as { messageExpiry?: number }).messageExpiry;
  return expiry === undefined ? 0 : Math.max(1, Math.ceil((expiry - Date.now()) / 1000));
}

/** A property the Redis copy of a publish carries: which emitter sent it. */
const SENT_BY = 'bridgeSentBy';

/**
 * A publish is delivered to this instance's subscribers at once, the way mqemitter-redis
 * delivers one that comes back from Redis (its base MQEmitter's emit, on the channel name its
 * subscriptions are registered under), and goes through Redis only for the other instances,
 * marked so that its copy coming back is dropped here. Without this, a reply to a device
 * connected here made a Redis round trip, and one published while Redis was away was lost
 * whenever the publishing connection came back before the subscribing one had subscribed
 * again (the two reconnect independently).
 *
 * While this instance is the only one on the Redis (the bridge's presence), the publish skips Redis
 * altogether: two Redis round trips and a message less per request.
 */
function deliverHereFirst(mq: RedisEmitter, channelPrefix: string, presence: { readonly alone: boolean } | undefined): void {
  // The MQEmitter that mqemitter-redis itself extends (not necessarily our own copy of it).
  const base = createRequire(require.resolve('mqemitter-redis'))('mqemitter') as { prototype: { emit: Emit } };
  const fromRedis = mq._emit;
  if (typeof fromRedis !== 'function') throw new Error('mqemitter-redis has no _emit: this version is not supported');
  const sender = randomBytes(8).toString('base64url');
  const viaRedis = mq.emit.bind(mq);
  const here: Emit = (packet, done) => base.prototype.emit.call(mq, { ...packet, topic: channelPrefix + packet.topic }, done);

  mq._emit = (packet, done) => (packet[SENT_BY] === sender ? done?.() : fromRedis.call(mq, packet, done));
  mq.emit = (packet, done) => {
    if (presence?.alone) return here(packet, done);
    // Done once both are: Aedes acknowledges the publisher then, as it did when the one
    // publish through Redis was done.
    let pending = 2;
    let failure: Error | undefined;
    const settle = (err?: Error): void => {
      failure ??= err;
      if (--pending > 0) return;
      if (done) done(failure);
      else if (failure) mq.state.emit('error', failure);
    };
    here(packet, settle);
    return viaRedis({ ...packet, [SENT_BY]: sender }, settle);
  };
}

function ready(conn: RedisConnection, timeoutMs: number): Promise<void> {
  if (conn.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    let lastError = 'timed out';
    const onError = (err: Error): void => {
      lastError = err.message || String(err);
    };
    const timer = setTimeout(() => {
      conn.off('error', onError);
      conn.off('ready', onReady);
      reject(new Error(`no connection within ${timeoutMs} ms (${lastError})`));
    }, timeoutMs);
    const onReady = (): void => {
      clearTimeout(timer);
      conn.off('error', onError);
      resolve();
    };
    conn.on('error', onError);
    conn.once('ready', onReady);
  });
}

/** QUIT, falling back to a hard disconnect when Redis does not answer within a second. */
async function quit(conn: RedisConnection): Promise<void> {
  if (conn.status === 'end') return;
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), 1000);
  });
  const result = await Promise.race([conn.quit().catch(() => 'failed' as const), gaveUp]);
  clearTimeout(timer);
  if (result === 'timeout' || result === 'failed') conn.disconnect();
}
