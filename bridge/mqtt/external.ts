// The broker port over the plant's own broker (BROKER_URL): the bridge is an MQTT 5 client
// with a stable client id and a persistent session, subscribed at QoS 1 to a shared
// subscription so several instances split the requests. A request's PUBACK goes to the
// broker only once the request is admitted: a bridge killed before that leaves it
// unacknowledged in its session, and the broker delivers it again.
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import mqtt, { type IClientOptions, type IPublishPacket, type MqttClient } from 'mqtt';
import type { Logger } from 'pino';
import {
  ConfigError,
  parseInferTopic,
  requestPropertiesOf,
  PUBACK_REASON,
  topics,
  type Publish,
  type RequestHandler,
} from '../../contract/index.js';
import type { MqttPort } from './port.js';

export interface ExternalBrokerOptions {
  brokerUrl: string;
  brokerUsername?: string | undefined;
  brokerPassword?: string | undefined;
  brokerCaFile?: string | undefined;
  brokerCertFile?: string | undefined;
  brokerKeyFile?: string | undefined;
  brokerShareGroup: string;
  brokerSessionExpiryS: number;
}

/** The bridge's own retained status: `offline` is the Will, `online` is sent on every connect. */
export interface StatusMessages {
  topic: string;
  online: Buffer;
  offline: Buffer;
}

export interface ExternalPort extends MqttPort {
  readonly mode: 'external';
  readonly client: MqttClient;
}

const RECONNECT_MIN_MS = 500;
const CONNECT_TIMEOUT_MS = 10_000;
/** Unacknowledged requests the broker may have on the way to this instance at once. */
const RECEIVE_MAXIMUM = 100;
/** On a graceful stop: how long no request must arrive before the broker is taken to have sent its last. */
const QUIET_MS = 200;
const QUIESCE_MAX_MS = 5000;

export function sharedSubscription(group: string): string {
  return `$share/${group}/${topics.inferWildcard}`;
}

/**
 * Connects to the plant's broker; resolves on the first CONNACK (or the first failed attempt,
 * starting unready). Lost connections are retried every RECONNECT_MIN_MS, and `connected()`
 * is false until the broker has granted the shared subscription again.
 */
export async function openExternal(
  options: ExternalBrokerOptions,
  clientId: string,
  status: StatusMessages,
  onRequest: RequestHandler,
  logger: Logger,
): Promise<ExternalPort> {
  const log = logger.child({ module: 'external-broker', broker: redactUrl(options.brokerUrl), clientId });
  const filter = sharedSubscription(options.brokerShareGroup);
  const admissions = new AdmissionCount();
  const client = mqtt.connect(options.brokerUrl, {
    ...clientOptions(options, clientId, status),
    // Admission runs here, before the PUBACK; mqtt.js sends it when this calls back.
    // mqtt.js hands over one message at a time, so admissions on this connection run one
    // after another.
    customHandleAcks: (topic, payload, packet: IPublishPacket, done) => {
      admissions.started();
      admit(topic, payload, packet, onRequest, log)
        .then(
          (code) => done(code),
          (err: unknown) => {
            // No PUBACK at all: the broker keeps the request and delivers it again.
            log.error({ err, topic }, 'request handler failed: left unacknowledged');
            done(err instanceof Error ? err : new Error(String(err)));
          },
        )
        .finally(() => admissions.ended());
    },
  });
  // A QoS 0 request has no PUBACK to hold: it arrives as a plain message (QoS 1 ones arrive
  // here too, once acknowledged, and are skipped).
  client.on('message', (topic, payload, packet) => {
    if (packet.qos !== 0) return;
    admissions.started();
    admit(topic, payload, packet, onRequest, log)
      .catch((err: unknown) => log.error({ err, topic }, 'request handler failed'))
      .finally(() => admissions.ended());
  });
  // Connected and subscribed: only then can requests arrive.
  let up = false;
  let subscribed = false;
  let connects = 0;
  let quiescing = false;
  client.on('connect', (connack) => {
    up = true;
    subscribed = false;
    connects += 1;
    log.info({ sessionPresent: connack.sessionPresent, connects }, 'connected to the broker');
    // The Will may have marked this instance offline while it was away.
    client.publish(status.topic, status.online, { qos: 1, retain: true });
    // Every time: a session may be present without the subscription (a graceful stop drops it).
    if (!quiescing) subscribe(client, filter, log, () => (subscribed = true));
  });
  client.on('close', () => {
    if (up) log.warn('broker connection lost: reconnecting; requests wait in the broker meanwhile');
    up = false;
  });
  client.on('error', (err) => log.warn({ err: err.message }, 'broker connection error'));
  await firstConnection(client, options.brokerUrl, log);

  const publish: Publish = async (topic, payload, { qos, retain, properties }) => {
    // While the connection is down mqtt.js keeps the publish and sends it once it is back.
    await client.publishAsync(topic, payload, { qos, retain, ...(properties ? { properties } : {}) });
  };
  return {
    mode: 'external',
    client,
    publish,
    connected: () => up && (subscribed || quiescing),
    clientIds: () => [],
    refusals: () => ({ publish: 0, subscribe: 0, connect: 0 }),
    ports: {},
    reloadAuth: () => log.info('AUTH_FILE does not apply with BROKER_URL: the broker authenticates devices'),
    async quiesce() {
      // Unsubscribed, the broker gives this instance's share to the others at once; what it
      // already delivered here is admitted before the bridge stops taking requests.
      quiescing = true;
      if (up) await client.unsubscribeAsync(filter).catch((err: unknown) => log.warn({ err }, 'could not unsubscribe'));
      await admissions.quiet(QUIET_MS, QUIESCE_MAX_MS);
      log.info('unsubscribed: the other instances of the share group take the requests');
    },
    async close() {
      // A clean DISCONNECT: the Will is not sent, the app publishes `offline` itself.
      await client.endAsync();
    },
  };
}

/** Admissions under way on the connection, so a graceful stop can wait for the last one. */
class AdmissionCount {
  private running = 0;
  private lastEnd = 0;

  started(): void {
    this.running += 1;
  }

  ended(): void {
    this.running -= 1;
    this.lastEnd = Date.now();
  }

  /** Resolves once none has run for `quietMs` (or after `maxMs` whatever happens). */
  async quiet(quietMs: number, maxMs: number): Promise<void> {
    const deadline = Date.now() + maxMs;
    this.lastEnd = Math.max(this.lastEnd, Date.now());
    while (Date.now() < deadline && (this.running > 0 || Date.now() - this.lastEnd < quietMs)) await sleep(20);
  }
}

function clientOptions(options: ExternalBrokerOptions, clientId: string, status: StatusMessages): IClientOptions {
  const read = (path: string | undefined): Buffer | undefined => (path === undefined ? undefined : readFileSync(path));
  return {
    clientId,
    protocolVersion: 5,
    clean: false,
    username: options.brokerUsername,
    password: options.brokerPassword,
    ca: read(options.brokerCaFile),
    cert: read(options.brokerCertFile),
    key: read(options.brokerKeyFile),
    reconnectPeriod: RECONNECT_MIN_MS,
    // We subscribe on every connect ourselves: mqtt.js' own resubscription skips a filter it
    // believes it holds, and Mosquitto forgets shared subscriptions across its restart.
    resubscribe: false,
    connectTimeout: CONNECT_TIMEOUT_MS,
    properties: { sessionExpiryInterval: options.brokerSessionExpiryS, receiveMaximum: RECEIVE_MAXIMUM },
    will: { topic: status.topic, payload: status.offline, qos: 1, retain: true },
  };
}

async function admit(
  topicName: string,
  payload: Buffer,
  packet: IPublishPacket,
  onRequest: RequestHandler,
  log: Logger,
): Promise<number> {
  const topic = parseInferTopic(topicName);
  if (!topic) {
    // The subscription only matches request topics; a device id outside the contract lands here.
    log.warn({ topic: topicName }, 'message on a request topic with an invalid device id: dropped');
    return PUBACK_REASON.payloadFormatInvalid;
  }
  const refusal = await onRequest({ topic, payload, properties: requestPropertiesOf(packet.properties) });
  return refusal ? refusal.reasonCode : 0;
}

function subscribe(client: MqttClient, filter: string, log: Logger, granted: () => void): void {
  client.subscribe(filter, { qos: 1 }, (err, grants) => {
    const code = grants?.[0]?.qos;
    if (err || code === undefined || code > 2) {
      log.error({ err: err?.message, filter, code }, 'the broker refused the shared subscription: no request will arrive');
      return;
    }
    log.info({ filter, qos: code }, 'subscribed');
    granted();
  });
}

/**
 * Resolves on the first CONNACK, or once the first attempt failed for the network (the
 * bridge starts unready and keeps trying: the broker may start after it). A broker that
 * refuses the connection (credentials, client id) rejects: retrying would not help.
 */
function firstConnection(client: MqttClient, url: string, log: Logger): Promise<void> {
  return new Promise((resolve, reject) => {
    const settle = (): void => {
      client.off('connect', onConnect);
      client.off('error', onError);
      client.off('offline', onOffline);
    };
    const onError = (err: Error & { code?: unknown }): void => {
      if (typeof err.code !== 'number') return; // a network error: 'offline' follows
      settle();
      client.end(true);
      reject(new ConfigError('BROKER_URL', `${redactUrl(url)} refused the connection: ${err.message}`));
    };
    const onOffline = (): void => {
      settle();
      log.warn('broker unreachable: starting unready and retrying');
      resolve();
    };
    const onConnect = (): void => {
      settle();
      resolve();
    };
    client.on('connect', onConnect);
    client.on('error', onError);
    client.on('offline', onOffline);
  });
}

/** The URL without credentials, for logs. */
function redactUrl(url: string): string {
  const parsed = new URL(url);
  parsed.username = '';
  parsed.password = '';
  return parsed.toString();
}
