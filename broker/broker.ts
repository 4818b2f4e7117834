// The embedded MQTT broker: Aedes with the contract's access rules, hooked so that a
// request is admitted before its PUBLISH is acknowledged. Who a client is comes from
// AUTH_FILE credentials, an mTLS certificate, or (when allowed) its client id alone.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Socket } from 'node:net';
import { Aedes, type AuthenticateError, type Client, type ConnectPacket, type PublishPacket } from 'aedes';
import {
  deviceIdOfClientId,
  parseInferTopic,
  requestPropertiesOf,
  DEVICE_ID_PATTERN,
  type Publish,
  type RequestHandler,
} from '../contract/index.js';
import type { Logger } from 'pino';
import { mayPublish, maySubscribe, type Identity } from './acl.js';
import {
  authenticateAnonymous,
  clientIdBelongsTo,
  DEFAULT_THROTTLE,
  hashPassword,
  loadAuthFile,
  LoginThrottle,
  verifyPassword,
  type ThrottleOptions,
  type User,
} from './auth.js';
import type { ClusterPlugins } from './cluster.js';
import { startListeners, type ConnectionInfo } from './listeners.js';
import { createLocalEmitter } from './emitter.js';
import { limitInboundQos2 } from './inbound-qos2.js';
import { writeRefusal, type QuietClients } from './puback-refusal.js';
import type { BrokerConfig } from './options.js';

export { listen } from './listeners.js';
export type { BrokerConfig } from './options.js';

/** Counts of refused operations, for metrics. */
export interface Refusals {
  publish: number;
  subscribe: number;
  /** Every refused CONNECT, whatever the reason (includes `login` and `throttled`). */
  connect: number;
  /** Failed logins: unknown user or wrong password. */
  login: number;
  /** CONNECTs refused or delayed because their address failed to log in too often. */
  throttled: number;
  /** TLS handshakes refused (no or an untrusted client certificate, an old protocol). */
  tls: number;
}

export interface Broker {
  readonly aedes: Aedes;
  readonly mqttPort: number;
  /** The bound TLS port, with MQTT_TLS_PORT. */
  readonly tlsPort: number | undefined;
  /** The bound WebSocket port, with MQTT_WS_PORT. */
  readonly wsPort: number | undefined;
  publish: Publish;
  readonly refusals: Refusals;
  /**
   * Re-reads AUTH_FILE (on SIGHUP); connected clients stay. A bad file keeps the users
   * already loaded and is reported in the returned error. No-op without AUTH_FILE.
   */
  reloadAuth(): { ok: true; users: number } | { ok: false; error: string };
  close(): Promise<void>;
}

export interface BrokerOptions {
  /** Failed-login throttle; the default slows an address after 5 failures in 60 s. */
  throttle?: ThrottleOptions;
}

const FLUSH_MIN_MS = 50;
const FLUSH_MAX_MS = 1000;

// The contract's defaults, for a BrokerConfig that does not set them.
const DEFAULT_MAX_PAYLOAD_BYTES = 262_144;
const DEFAULT_MAX_CLIENT_BACKLOG_BYTES = 4_194_304;
const DEFAULT_MAX_SUBSCRIPTIONS = 100;
const DEFAULT_MAX_SESSION_EXPIRY_S = 86_400;

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

// CONNACK return codes (MQTT 3.1.1; mqtt.js maps them to v5 reason codes for v5 clients).
const SERVER_UNAVAILABLE = 3;
const IDENTIFIER_REJECTED = 2;
const BAD_CREDENTIALS = 4;
const NOT_AUTHORIZED = 5;

const authError = (returnCode: number, message: string): AuthenticateError =>
  Object.assign(new Error(message), { returnCode }) as AuthenticateError;

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
  const log = logger.child({ module: 'broker' });
  const identities = new WeakMap<Client, Identity>();
  const connectPackets = new WeakMap<Client, ConnectPacket>();
  const quiet: QuietClients = new WeakSet();
  const connections = new WeakMap<object, ConnectionInfo>();
  const refusals: Refusals = { publish: 0, subscribe: 0, connect: 0, login: 0, throttled: 0, tls: 0 };
  const throttle = new LoginThrottle(options.throttle ?? DEFAULT_THROTTLE);
  const maxSubscriptions = config.maxSubscriptions ?? DEFAULT_MAX_SUBSCRIPTIONS;
  /** The filters granted to each client (MAX_SUBSCRIPTIONS), including ones still being added. */
  const granted = new WeakMap<Client, Set<string>>();
  const grantedTo = (client: Client): Set<string> => {
    let set = granted.get(client);
    if (!set) {
      // Seeded from Aedes' own list: a persistent session's restored subscriptions count too.
      set = new Set(Object.keys((client as unknown as { subscriptions?: Record<string, unknown> }).subscriptions ?? {}));
      granted.set(client, set);
    }
    return set;
  };

  // A bad AUTH_FILE stops the start (ConfigError naming AUTH_FILE, exit 2 in main).
  let users: Map<string, User> | undefined = config.authFile === undefined ? undefined : loadAuthFile(config.authFile);
  if (users) log.info({ authFile: config.authFile, users: users.size }, 'credentials loaded');
  // Unknown users are checked against this hash so they take as long as known ones.
  const decoyHash = users ? await hashPassword('decoy') : '';

  /** Resolves who the client is, or a CONNACK code and the reason it is refused. */
  async function identify(
    client: Client,
    username: string | undefined,
    password: Readonly<Buffer> | undefined,
  ): Promise<Identity | { code: number; reason: string; login?: true }> {
    const info = connections.get(client.conn);
    const address = info?.address ?? 'unknown';
    if (username !== undefined) {
      if (!users) return { code: BAD_CREDENTIALS, reason: 'credentials given but no AUTH_FILE is configured' };
      const wait = throttle.admit(address);
      if (wait === null) {
        refusals.throttled += 1;
        return { code: SERVER_UNAVAILABLE, reason: 'too many failed logins from this address: try later' };
      }
      if (wait > 0) {
        refusals.throttled += 1;
        log.warn({ clientId: client.id, address, delayMs: wait }, 'login delayed: too many failed logins from this address');
        await sleep(wait);
      }
      const user = users.get(username);
      const ok = await verifyPassword(password ?? Buffer.alloc(0), user?.passwordHash ?? decoyHash);
      if (!user || !ok) {
        throttle.fail(address);
        refusals.login += 1;
        return { code: BAD_CREDENTIALS, reason: user ? 'wrong password' : 'unknown user', login: true };
      }
      if (user.role === 'device') {
        const deviceId = user.deviceId as string; // the schema requires it for devices
        if (!clientIdBelongsTo(client.id, deviceId)) {
          return { code: IDENTIFIER_REJECTED, reason: `client id must be ${deviceId} or begin with ${deviceId}.` };
        }
        return { role: 'device', deviceId };
      }
      // Observers and operators pick their own client ids, but never a registered device's:
      // taking that id would end the device's session (Aedes drops the older connection).
      const claimed = deviceIdOfClientId(client.id);
      if (claimed !== null && [...users.values()].some((u) => u.deviceId === claimed)) {
        return { code: IDENTIFIER_REJECTED, reason: `client id ${client.id} belongs to device ${claimed}` };
      }
      return { role: user.role, deviceId: undefined };
    }
    if (info?.certIdentity !== undefined) {
      const deviceId = info.certIdentity;
      if (!DEVICE_ID_PATTERN.test(deviceId)) return { code: NOT_AUTHORIZED, reason: `certificate name ${deviceId} is not a device id` };
      if (!clientIdBelongsTo(client.id, deviceId)) {
        return { code: IDENTIFIER_REJECTED, reason: `client id must be ${deviceId} or begin with ${deviceId}. (certificate)` };
      }
      return { role: 'device', deviceId };
    }
    if (!config.allowAnonymous) return { code: NOT_AUTHORIZED, reason: 'anonymous clients are not allowed' };
    return authenticateAnonymous(client.id) ?? { code: IDENTIFIER_REJECTED, reason: 'client id does not start with a valid device id' };
  }

  const aedes = await Aedes.createBroker({
    connectTimeout: config.connectTimeoutMs,
    keepaliveLimit: config.keepaliveLimitS,
    drainTimeout: config.drainTimeoutMs,
    maxTopicLevels: MAX_TOPIC_LEVELS,
    // MQTT 5: tells v5 clients the in-flight window MAX_INFLIGHT_QOS2 enforces (inbound-qos2.ts).
    receiveMaximum: config.maxInflightQos2,
    topicAliasMaximum: TOPIC_ALIAS_MAXIMUM,
    sessionExpiryIntervalLimit: config.maxSessionExpiryS ?? DEFAULT_MAX_SESSION_EXPIRY_S,
    // Sessions waiting to expire, each with a timer: no more than there may be clients.
    pendingSessionsLimit: config.maxConnections,
    maximumPacketSize: (config.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES) + PACKET_OVERHEAD_BYTES,
    ...(plugins ? { mq: plugins.mq, persistence: plugins.persistence } : { mq: createLocalEmitter() }),

    preConnect(client, packet, callback) {
      if (packet.properties?.requestProblemInformation === false) quiet.add(client);
      withoutPrototype(client, 'subscriptions', 'duplicates');
      connectPackets.set(client, packet);
      callback(null, true);
    },

    authenticate(client, username, password, done) {
      const refuse = (code: number, reason: string, extra: Record<string, unknown> = {}): void => {
        refusals.connect += 1;
        const address = connections.get(client.conn)?.address;
        // Never the password: only who tried, from where, and why it failed.
        log.warn({ clientId: client.id, username, address, reason, ...extra }, 'connection refused');
        done(authError(code, reason), false);
      };
      if (aedes.connectedClients >= config.maxConnections) return refuse(SERVER_UNAVAILABLE, 'MAX_CONNECTIONS reached');
      identify(client, username, password).then(
        (result) => {
          if ('code' in result) return refuse(result.code, result.reason);
          const will = connectPackets.get(client)?.will;
          connectPackets.delete(client);
          if (will && !mayPublish(result, will.topic)) return refuse(NOT_AUTHORIZED, `will topic ${will.topic} is not allowed`);
          identities.set(client, result);
          done(null, true);
        },
        (err: unknown) => {
          log.error({ err, clientId: client.id }, 'authentication failed');
          refuse(SERVER_UNAVAILABLE, 'authentication failed');
        },
      );
    },

    authorizePublish(client, packet, callback) {
      const identity = client ? identities.get(client) : undefined;
      if (!client || !identity || !mayPublish(identity, packet.topic)) {
        refusals.publish += 1;
        log.warn(
          { clientId: client?.id, role: identity?.role, topic: packet.topic },
          "publish refused: outside the client's topics",
        );
        return callback(new Error('publish not authorized'));
      }
      // Aedes 2.0.0-beta.1 leaves a resolved alias as `topicAlias: undefined`, which the Redis
      // emitter turns into null: every MQTT 5 subscriber served through Redis would then fail
      // to encode the message and be disconnected.
      if (packet.properties && 'topicAlias' in packet.properties) delete packet.properties.topicAlias;
      const topic = parseInferTopic(packet.topic);
      if (!topic) return callback(null);
      // Requests are never stored as retained messages, whatever the device asked for.
      packet.retain = false;
      // Admission before callback: Aedes sends PUBACK/PUBREC only after this calls back.
      onRequest({ topic, payload: toBuffer(packet), properties: requestPropertiesOf(packet.properties) }).then(
        (refusal) => {
          if (refusal) writeRefusal(client, packet, refusal, quiet);
          callback(null);
        },
        (err: unknown) => {
          log.error({ err, clientId: client.id }, 'request handler failed');
          callback(null);
        },
      );
    },

    authorizeSubscribe(client, subscription, callback) {
      const identity = identities.get(client);
      if (!identity || !maySubscribe(identity, subscription.topic)) {
        refusals.subscribe += 1;
        log.warn(
          { clientId: client.id, role: identity?.role, topic: subscription.topic },
          "subscription refused: outside the client's topics",
        );
        return callback(null, null); // SUBACK 128
      }
      const filters = grantedTo(client);
      if (!filters.has(subscription.topic) && filters.size >= maxSubscriptions) {
        refusals.subscribe += 1;
        log.warn({ clientId: client.id, topic: subscription.topic, limit: maxSubscriptions }, 'subscription refused: MAX_SUBSCRIPTIONS reached');
        return callback(null, null); // SUBACK 128
      }
      filters.add(subscription.topic);
      callback(null, subscription);
    },
  });

  withoutPrototype(aedes, 'clients', 'brokers');
  limitInboundQos2(aedes, config.maxInflightQos2, log);
  aedes.on('unsubscribe', (topics, client) => {
    const filters = granted.get(client);
    for (const topic of topics) filters?.delete(topic);
  });
  aedes.on('clientDisconnect', (client) => granted.delete(client));
  aedes.on('clientError', (client, err) => log.debug({ clientId: client.id, err: err.message }, 'client error'));
  aedes.on('connectionError', (client, err) => log.debug({ clientId: client.id, err: err.message }, 'connection error'));

  let listeners;
  try {
    listeners = await startListeners(config, aedes, connections, log, () => (refusals.tls += 1), {
      maxPacketBytes: (config.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES) + PACKET_OVERHEAD_BYTES,
      maxBacklogBytes: config.maxClientBacklogBytes ?? DEFAULT_MAX_CLIENT_BACKLOG_BYTES,
    });
  } catch (err) {
    await new Promise<void>((resolve) => aedes.close(() => resolve()));
    throw err;
  }
  const { sockets } = listeners;

  const publish: Publish = (topic, payload, options) =>
    new Promise((resolve, reject) => {
      const { qos, retain, properties } = options;
      aedes.publish({ cmd: 'publish', topic, payload, qos, retain, dup: false, ...(properties ? { properties } : {}) }, (err) =>
        err ? reject(err) : resolve(),
      );
    });

  return {
    aedes,
    mqttPort: listeners.mqttPort,
    tlsPort: listeners.tlsPort,
    wsPort: listeners.wsPort,
    publish,
    refusals,
    reloadAuth() {
      if (config.authFile === undefined) return { ok: true, users: 0 };
      try {
        users = loadAuthFile(config.authFile);
        log.info({ authFile: config.authFile, users: users.size }, 'auth file reloaded');
        return { ok: true, users: users.size };
      } catch (err) {
        const error = err instanceof Error ? err.message : String(err);
        log.error({ authFile: config.authFile, err: error }, 'auth file reload failed: keeping the users already loaded');
        return { ok: false, error };
      }
    },
    async close() {
      listeners.close();
      await flush(sockets);
      await new Promise<void>((resolve) => aedes.close(() => resolve()));
      // After Aedes: its close() disconnects clients through them and closes the emitter.
      await plugins?.close();
    },
  };
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

/**
 * GHSA-52qw-whmv-87c5, fixed in Aedes 1.1.3 but not in 2.0.0-beta.1: Aedes keys these maps by
 * client ids, topic filters and broker ids from the wire, and with a plain `{}` a name that
 * Object.prototype has (`toString`, `constructor`, `__proto__`…) reads back as present. One
 * UNSUBSCRIBE of `toString` from any device, or a client id `constructor`, threw out of Aedes
 * and ended the process. Replaces each map (still empty, or copied) by a prototype-less one.
 */
function withoutPrototype(owner: object, ...keys: string[]): void {
  const maps = owner as Record<string, object>;
  for (const key of keys) maps[key] = Object.assign(Object.create(null) as object, maps[key]);
}

function toBuffer(packet: PublishPacket): Buffer {
  return Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload);
}
