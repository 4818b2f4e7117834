// The embedded MQTT broker: Aedes with the contract's access rules, hooked so that a
// request is admitted before its PUBLISH is acknowledged.
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { Aedes, type AuthenticateError, type Client, type ConnectPacket, type PublishPacket } from 'aedes';
import type { Config } from '../bridge/config.js';
import { parseInferTopic, type InferTopic } from '../bridge/contract.js';
import type { Logger } from '../bridge/logger.js';
import type { Publish } from '../bridge/results.js';
import { mayPublish, maySubscribe, type Identity } from './acl.js';
import { authenticateAnonymous } from './auth.js';
import type { ClusterPlugins } from './cluster.js';

export type BrokerConfig = Pick<
  Config,
  | 'mqttHost'
  | 'mqttPort'
  | 'allowAnonymous'
  | 'maxConnections'
  | 'connectTimeoutMs'
  | 'keepaliveLimitS'
  | 'drainTimeoutMs'
  | 'maxInflightQos2'
>;

/** Admits one request; resolves once it is queued or answered with an error reply. */
export type RequestHandler = (topic: InferTopic, payload: Buffer) => Promise<unknown>;

export interface Broker {
  readonly aedes: Aedes;
  readonly mqttPort: number;
  publish: Publish;
  /** Counts of refused operations, for metrics. */
  readonly refusals: { publish: number; subscribe: number; connect: number };
  close(): Promise<void>;
}

/** A listener could not bind; names the variable that fixes it. */
export class ListenError extends Error {
  override readonly name = 'ListenError';
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(message);
  }
}

const FLUSH_MIN_MS = 50;
const FLUSH_MAX_MS = 1000;

/** Our topics have at most 4 levels; a low cap keeps topic matching cheap (GHSA-xxqp-5qx8-gj5q). */
const MAX_TOPIC_LEVELS = 32;

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
): Promise<Broker> {
  const log = logger.child({ module: 'broker' });
  const identities = new WeakMap<Client, Identity>();
  const connectPackets = new WeakMap<Client, ConnectPacket>();
  const refusals = { publish: 0, subscribe: 0, connect: 0 };

  const aedes = await Aedes.createBroker({
    connectTimeout: config.connectTimeoutMs,
    keepaliveLimit: config.keepaliveLimitS,
    drainTimeout: config.drainTimeoutMs,
    maxInflightInbound: config.maxInflightQos2,
    maxTopicLevels: MAX_TOPIC_LEVELS,
    ...(plugins ? { mq: plugins.mq, persistence: plugins.persistence } : {}),

    preConnect(client, packet, callback) {
      connectPackets.set(client, packet);
      callback(null, true);
    },

    authenticate(client, username, _password, done) {
      const refuse = (code: number, reason: string): void => {
        refusals.connect += 1;
        log.warn({ clientId: client.id, reason }, 'connection refused');
        done(authError(code, reason), false);
      };
      if (aedes.connectedClients >= config.maxConnections) return refuse(3, 'MAX_CONNECTIONS reached');
      if (username !== undefined || !config.allowAnonymous) return refuse(4, 'credentials are not accepted by this build');
      const identity = authenticateAnonymous(client.id);
      if (!identity) return refuse(2, 'client id does not start with a valid device id');
      const will = connectPackets.get(client)?.will;
      connectPackets.delete(client);
      if (will && !mayPublish(identity, will.topic)) return refuse(5, `will topic ${will.topic} is not allowed`);
      identities.set(client, identity);
      done(null, true);
    },

    authorizePublish(client, packet, callback) {
      const identity = client ? identities.get(client) : undefined;
      if (!client || !identity || !mayPublish(identity, packet.topic)) {
        refusals.publish += 1;
        log.warn({ clientId: client?.id, topic: packet.topic }, 'publish refused: outside the client\'s topics');
        return callback(new Error('publish not authorized'));
      }
      const topic = parseInferTopic(packet.topic);
      if (!topic) return callback(null);
      // Requests are never stored as retained messages, whatever the device asked for.
      packet.retain = false;
      // Admission before callback: Aedes sends PUBACK/PUBREC only after this calls back.
      onRequest(topic, toBuffer(packet)).then(
        () => callback(null),
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
        log.warn({ clientId: client.id, topic: subscription.topic }, 'subscription refused: outside the client\'s topics');
        return callback(null, null); // SUBACK 128
      }
      callback(null, subscription);
    },
  });

  aedes.on('clientError', (client, err) => log.debug({ clientId: client.id, err: err.message }, 'client error'));
  aedes.on('connectionError', (client, err) => log.debug({ clientId: client.id, err: err.message }, 'connection error'));

  const sockets = new Set<Socket>();
  const server = createServer((socket: Socket) => {
    // Without this each reply waits ~40 ms for the next packet (Nagle + delayed ACK).
    socket.setNoDelay(true);
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    aedes.handle(socket);
  });
  const mqttPort = await listen(server, config.mqttHost, config.mqttPort, 'MQTT_PORT', 'MQTT');
  log.info({ host: config.mqttHost, port: mqttPort }, 'MQTT listener up');

  const publish: Publish = (topic, payload, options) =>
    new Promise((resolve, reject) => {
      aedes.publish({ cmd: 'publish', topic, payload, qos: options.qos, retain: options.retain, dup: false }, (err) =>
        err ? reject(err) : resolve(),
      );
    });

  return {
    aedes,
    mqttPort,
    publish,
    refusals,
    async close() {
      server.close();
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

function toBuffer(packet: PublishPacket): Buffer {
  return Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload);
}

/** Binds a server; a busy port becomes a ListenError naming the variable to change. */
export async function listen(server: Server, host: string, port: number, variable: string, what: string): Promise<number> {
  server.listen(port, host);
  try {
    await once(server, 'listening');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new ListenError(variable, `${what} port ${port} is in use — set ${variable}`);
    if (code === 'EADDRNOTAVAIL') throw new ListenError(variable, `${what} address ${host} is not on this machine`);
    if (code === 'EACCES') throw new ListenError(variable, `${what} port ${port} needs privileges — set ${variable}`);
    throw err;
  }
  return (server.address() as AddressInfo).port;
}
