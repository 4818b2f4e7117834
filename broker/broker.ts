// The embedded MQTT broker: Aedes with the contract's access rules, hooked so that a
// request is admitted before its PUBLISH is acknowledged. Who a client is comes from
// AUTH_FILE credentials, an mTLS certificate, or (when allowed) its client id alone.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Socket } from 'node:net';
import { Aedes, type AedesOptions, type PublishPacket } from 'aedes';
import type { Publish, RequestHandler } from '../contract/index.js';
import type { Logger } from 'pino';
import { accessHooks } from './access-hooks.js';
import { DEFAULT_THROTTLE, type ThrottleOptions } from './auth.js';
import type { ClusterPlugins } from './cluster.js';
import { connectHooks } from './connect-hooks.js';
import { createContext, type BrokerContext, type Refusals } from './context.js';
import { createLocalEmitter } from './emitter.js';
import { Identifier, type ReloadResult } from './identify.js';
import { limitInboundQos2 } from './inbound-qos2.js';
import { startListeners, type Listeners } from './listeners.js';
import type { SlowDrop } from './stream-guard.js';
import type { BrokerConfig } from './options.js';
import { withoutPrototype } from './prototype-less.js';
import { SessionLimits, type SessionLimitsConfig, type SessionStats } from './session-limits.js';
import { MemorySessions } from './sessions-memory.js';
import { SubscriptionLimit } from './subscription-limit.js';

export type { BrokerConfig } from './options.js';
export type { Refusals } from './context.js';
export type { SessionStats } from './session-limits.js';

export interface Broker {
  readonly aedes: Aedes;
  readonly mqttPort: number;
  /** The bound TLS port, with MQTT_TLS_PORT. */
  readonly tlsPort: number | undefined;
  /** The bound WebSocket port, with MQTT_WS_PORT. */
  readonly wsPort: number | undefined;
  publish: Publish;
  readonly refusals: Refusals;
  /** Persistent sessions: queued messages, drops, refusals and expiries. */
  readonly sessions: SessionStats;
  /**
   * Re-reads AUTH_FILE (on SIGHUP); connected clients stay. A bad file keeps the users
   * already loaded and is reported in the returned error. No-op without AUTH_FILE.
   */
  reloadAuth(): ReloadResult;
  close(): Promise<void>;
}

export interface BrokerOptions {
  /** Failed-login throttle; the default slows an address after 5 failures in 60 s. */
  throttle?: ThrottleOptions;
  /**
   * False while the Redis behind `plugins` is out of reach: a CONNECT is then refused at once
   * (server unavailable) instead of waiting for the session store. Default: always available.
   */
  available?: () => boolean;
}

const FLUSH_MIN_MS = 50;
const FLUSH_MAX_MS = 1000;

/** MQTT 5 topic aliases one connection may register: a device needs a handful; each costs a topic string. */
export const TOPIC_ALIAS_MAXIMUM = 16;

/**
 * Room for the topic, properties and headers of a PUBLISH on top of MAX_PAYLOAD_BYTES: a packet
 * whose fixed header announces more than MAX_PAYLOAD_BYTES + this drops the connection before
 * its body is buffered (a request that is only a little too large still gets its
 * `payload_too_large` reply).
 */
export const PACKET_OVERHEAD_BYTES = 65_536;

/** Our topics have at most 4 levels; a low cap keeps topic matching cheap (GHSA-xxqp-5qx8-gj5q). */
const MAX_TOPIC_LEVELS = 32;

/**
 * `plugins` (from createClusterPlugins, with REDIS_URL) replace Aedes' in-memory emitter and
 * persistence; the broker then owns them: its close() closes them after Aedes.
 */
export async function startBroker(
  config: BrokerConfig,
  onRequest: RequestHandler,
  logger: Logger,
  plugins?: ClusterPlugins,
  options: BrokerOptions = {},
): Promise<Broker> {
  const ctx = createContext(config, logger.child({ module: 'broker' }));
  const identifier = await Identifier.create(ctx, options.throttle ?? DEFAULT_THROTTLE);
  const subscriptions = new SubscriptionLimit(config.maxSubscriptions);
  const { maxTopicLength } = config;
  const available = options.available ?? ((): boolean => true);
  const sessions = new SessionLimits(
    plugins?.sessions ?? new MemorySessions(),
    sessionLimits(config),
    ctx.log,
    () => (ctx.refusals.connect += 1),
    plugins?.report,
  );
  const aedes: Aedes = await Aedes.createBroker({
    ...limitOptions(config),
    ...(plugins ? { mq: plugins.mq, persistence: plugins.persistence } : { mq: createLocalEmitter() }),
    ...sessions.guard(connectHooks(ctx, identifier, { connectedClients: () => aedes.connectedClients, available, maxTopicLength })),
    ...accessHooks(ctx, onRequest, subscriptions, maxTopicLength),
  });
  watchClients(aedes, ctx, subscriptions);
  await sessions.start(aedes);
  const listeners = await openListeners(aedes, ctx);
  return {
    aedes,
    mqttPort: listeners.mqttPort,
    tlsPort: listeners.tlsPort,
    wsPort: listeners.wsPort,
    publish: publisherOf(aedes),
    refusals: ctx.refusals,
    sessions: sessions.stats,
    reloadAuth: () => identifier.reload(),
    close: () => {
      sessions.stop();
      return closeBroker(aedes, listeners, plugins);
    },
  };
}

function sessionLimits(config: BrokerConfig): SessionLimitsConfig {
  return {
    maxSessionsPerDevice: config.maxSessionsPerDevice,
    maxSessionExpiryS: config.maxSessionExpiryS,
    maxMessages: config.maxOfflineMessages,
    messageTtlS: config.offlineMessageTtlS,
  };
}

/** Aedes' timeouts and the MQTT 5 limits it enforces and advertises in CONNACK. */
function limitOptions(config: BrokerConfig): AedesOptions {
  return {
    connectTimeout: config.connectTimeoutMs,
    keepaliveLimit: config.keepaliveLimitS,
    maxTopicLevels: MAX_TOPIC_LEVELS,
    // MQTT 5: tells v5 clients the in-flight window MAX_INFLIGHT_QOS2 enforces (inbound-qos2.ts).
    receiveMaximum: config.maxInflightQos2,
    topicAliasMaximum: TOPIC_ALIAS_MAXIMUM,
    sessionExpiryIntervalLimit: config.maxSessionExpiryS,
    // Sessions waiting to expire, each with a timer: no more than there may be clients.
    pendingSessionsLimit: config.maxConnections,
    maximumPacketSize: maxPacketBytes(config),
  };
}

function maxPacketBytes(config: BrokerConfig): number {
  return Math.max(config.maxPayloadBytes, config.imageMaxBytes) + PACKET_OVERHEAD_BYTES;
}

/** What Aedes 2.0.0-beta.1 lacks, and client errors (expected from devices) kept to debug. */
function watchClients(aedes: Aedes, ctx: BrokerContext, subscriptions: SubscriptionLimit): void {
  withoutPrototype(aedes, 'clients', 'brokers');
  limitInboundQos2(aedes, ctx.config.maxInflightQos2, ctx.log);
  subscriptions.follow(aedes);
  aedes.on('clientError', (client, err) => ctx.log.debug({ clientId: client.id, err: err.message }, 'client error'));
  aedes.on('connectionError', (client, err) => ctx.log.debug({ clientId: client.id, err: err.message }, 'connection error'));
}

/** Starts the listeners; when one cannot start, Aedes is closed before the error goes on. */
async function openListeners(aedes: Aedes, ctx: BrokerContext): Promise<Listeners> {
  const { config, refusals } = ctx;
  try {
    const hooks = {
      tlsRefused: () => (refusals.tls += 1),
      originRefused: () => (refusals.connect += 1),
      slowDropped: (reason: SlowDrop) => (refusals.slow[reason] += 1),
    };
    return await startListeners(config, aedes, ctx.connections, ctx.log, hooks, {
      maxPacketBytes: maxPacketBytes(config),
      maxBacklogBytes: config.maxClientBacklogBytes,
      drainTimeoutMs: config.drainTimeoutMs,
    });
  } catch (err) {
    await closeAedes(aedes);
    throw err;
  }
}

function publisherOf(aedes: Aedes): Publish {
  return (topic, payload, options) =>
    new Promise((resolve, reject) => {
      const { qos, retain, properties } = options;
      const packet: PublishPacket = { cmd: 'publish', topic, payload, qos, retain, dup: false };
      if (properties) packet.properties = properties;
      aedes.publish(packet, (err) => (err ? reject(err) : resolve()));
    });
}

async function closeBroker(aedes: Aedes, listeners: Listeners, plugins: ClusterPlugins | undefined): Promise<void> {
  listeners.close();
  await flush(listeners.sockets);
  await closeAedes(aedes);
  // After Aedes: its close() disconnects clients through them and closes the emitter.
  await plugins?.close();
}

function closeAedes(aedes: Aedes): Promise<void> {
  return new Promise<void>((resolve) => aedes.close(() => resolve()));
}

/**
 * Gives the last publishes (the offline status, late replies) time to reach the sockets and
 * leave them before Aedes drops every connection: a publish resolves once it is handed to
 * the emitter (through Redis, with REDIS_URL), not once a subscriber's socket has it.
 */
async function flush(sockets: Set<Socket>): Promise<void> {
  const deadline = Date.now() + FLUSH_MAX_MS;
  await sleep(FLUSH_MIN_MS);
  while (Date.now() < deadline && [...sockets].some((s) => s.writableLength > 0)) await sleep(10);
}
