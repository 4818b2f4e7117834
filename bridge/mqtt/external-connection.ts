// One MQTT 5 connection of the bridge to the plant's broker: a persistent session that is a
// member of the shared subscription. Admission runs in mqtt.js' customHandleAcks, so the
// request's PUBACK goes to the broker only once it is admitted; mqtt.js hands over one message
// at a time, so the admissions of one connection run one after another.
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import mqtt, { type IClientOptions, type IPublishPacket, type MqttClient, type OnMessageCallback } from 'mqtt';
import type { Logger } from 'pino';
import type { ConditionReport } from '../repeating-log.js';
import { ConfigError, parseInferTopic, PUBACK_REASON, requestPropertiesOf, type RequestHandler } from '../../contract/index.js';

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

const RECONNECT_MIN_MS = 500;
const CONNECT_TIMEOUT_MS = 10_000;
/** Unacknowledged requests the broker may have on the way to one connection at once. */
const RECEIVE_MAXIMUM = 100;

export interface BrokerConnection {
  readonly client: MqttClient;
  /** Connected and holding the shared subscription: requests can arrive. */
  ready(): boolean;
  /** Drops the shared subscription (graceful stop): the broker sends this connection no more. */
  unsubscribe(): Promise<void>;
}

/** The bridge's own retained status: `offline` is the Will, `online` is sent on every connect. */
export interface StatusMessages {
  topic: string;
  online: Buffer;
  offline: Buffer;
}

export interface ConnectionOptions {
  clientId: string;
  /** The shared-subscription filters: requests first (readiness waits for it), then images. */
  filters: string[];
  /** Set on one connection per instance: its status Will, and `online` published on every connect. */
  status?: StatusMessages | undefined;
  onRequest: RequestHandler;
  admissions: AdmissionCount;
  log: Logger;
  /** The broker out of reach, shared by the instance's connections (one set of lines for all). */
  unreachable: ConditionReport;
}

/**
 * Opens one connection; resolves on its first CONNACK, or once its first attempt failed for
 * the network (it keeps retrying every RECONNECT_MIN_MS). A broker that refuses it rejects.
 */
export async function openConnection(options: ExternalBrokerOptions, c: ConnectionOptions): Promise<BrokerConnection> {
  const { filters } = c;
  const log = c.log.child({ clientId: c.clientId });
  const hooks = admissionHooks(c.onRequest, c.admissions, log);
  const client = mqtt.connect(options.brokerUrl, { ...clientOptions(options, c), customHandleAcks: hooks.customHandleAcks });
  client.on('message', hooks.onMessage);
  let up = false;
  let subscribed = false;
  let unsubscribed = false;
  let connects = 0;
  let lastError: Error | undefined;
  client.on('connect', (connack) => {
    up = true;
    subscribed = false;
    connects += 1;
    lastError = undefined;
    c.unreachable.ok(c.clientId);
    // Reconnects are summed up by the condition's end line.
    log[connects === 1 ? 'info' : 'debug']({ sessionPresent: connack.sessionPresent, connects }, 'connected to the broker');
    // The Will may have marked this instance offline while it was away.
    if (c.status) client.publish(c.status.topic, c.status.online, { qos: 1, retain: true });
    // Every time: a session may be present without the subscription (a graceful stop drops
    // it, a broker restart may forget it).
    if (!unsubscribed) subscribe(client, filters, log, () => (subscribed = true));
  });
  // One report per failed attempt or lost connection: the error (if any) comes before the close.
  client.on('close', () => {
    // Ended by us (a stop, a refused start): expected, nothing to report.
    if (!client.disconnecting) c.unreachable.fail(c.clientId, lastError ?? new Error(up ? 'connection lost' : 'connection closed'));
    lastError = undefined;
    up = false;
  });
  client.on('error', (err) => {
    lastError = err;
  });
  await firstConnection(client, options.brokerUrl);
  return {
    client,
    ready: () => up && (subscribed || unsubscribed),
    async unsubscribe() {
      unsubscribed = true;
      if (up) await client.unsubscribeAsync(filters).catch((err: unknown) => log.warn({ err }, 'could not unsubscribe'));
    },
  };
}

/** Admissions under way on an instance's connections, so a graceful stop can wait for the last one. */
export class AdmissionCount {
  private running = 0;
  private lastEnd = 0;

  started(): void {
    this.running += 1;
  }

  ended(): void {
    this.running -= 1;
    this.lastEnd = Date.now();
  }

  /** None running, and none ended within the last `quietMs` nor after `since`. */
  quietFor(quietMs: number, since: number): boolean {
    return this.running === 0 && Date.now() - Math.max(this.lastEnd, since) >= quietMs;
  }

  /** Resolves once none has run for `quietMs` (or after `maxMs` whatever happens). */
  async quiet(quietMs: number, maxMs: number): Promise<void> {
    const deadline = Date.now() + maxMs;
    this.lastEnd = Math.max(this.lastEnd, Date.now());
    while (Date.now() < deadline && (this.running > 0 || Date.now() - this.lastEnd < quietMs)) await sleep(20);
  }
}

/** How one connection hands requests to admission: QoS 1 before its PUBACK, QoS 0 as it comes. */
export function admissionHooks(
  onRequest: RequestHandler,
  admissions: AdmissionCount,
  log: Logger,
): { customHandleAcks: NonNullable<IClientOptions['customHandleAcks']>; onMessage: OnMessageCallback } {
  const handle = (topic: string, payload: Buffer, packet: IPublishPacket): Promise<number> => {
    admissions.started();
    return admit(topic, payload, packet, onRequest, log).finally(() => admissions.ended());
  };
  return {
    customHandleAcks: (topic, payload, packet, done) => {
      handle(topic, payload, packet).then(
        (code) => done(code),
        (err: unknown) => {
          // No PUBACK at all: the broker keeps the request and delivers it again.
          log.error({ err, topic }, 'request handler failed: left unacknowledged');
          done(err instanceof Error ? err : new Error(String(err)));
        },
      );
    },
    // A QoS 0 request has no PUBACK to hold: it arrives as a plain message (QoS 1 ones arrive
    // here too, once acknowledged, and are skipped).
    onMessage: (topic, payload, packet) => {
      if (packet.qos !== 0) return;
      handle(topic, payload, packet).catch((err: unknown) => log.error({ err, topic }, 'request handler failed'));
    },
  };
}

/** A bridge connection's options: MQTT 5, a persistent session, Receive Maximum, TLS; the status Will when given. */
export function clientOptions(options: ExternalBrokerOptions, c: Pick<ConnectionOptions, 'clientId' | 'status'>): IClientOptions {
  const read = (path: string | undefined): Buffer | undefined => (path === undefined ? undefined : readFileSync(path));
  return {
    clientId: c.clientId,
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
    ...(c.status ? { will: { topic: c.status.topic, payload: c.status.offline, qos: 1 as const, retain: true } } : {}),
  };
}

async function admit(topicName: string, payload: Buffer, packet: IPublishPacket, onRequest: RequestHandler, log: Logger): Promise<number> {
  const topic = parseInferTopic(topicName);
  if (!topic) {
    // The subscription only matches request topics; a device id outside the contract lands here.
    log.warn({ topic: topicName.slice(0, 128), topicBytes: Buffer.byteLength(topicName) }, 'message on a request topic with an invalid device id: dropped');
    return PUBACK_REASON.payloadFormatInvalid;
  }
  // DUP: the broker sent it to this session before (to this connection, or to whoever held the
  // session then), so it may have been admitted and answered already.
  const refusal = await onRequest({ topic, payload, properties: requestPropertiesOf(packet.properties), redelivered: packet.dup });
  return refusal ? refusal.reasonCode : 0;
}

function subscribe(client: MqttClient, filters: string[], log: Logger, granted: () => void): void {
  client.subscribe(filters, { qos: 1 }, (err, grants) => {
    const [filter, imageFilter] = filters;
    const code = grants?.[0]?.qos;
    if (err || code === undefined || code > 2) {
      log.error({ err: err?.message, filter, code }, 'the broker refused the shared subscription: no request will arrive');
      return;
    }
    // Every time, reconnects too: from now on requests arrive on this connection.
    log.info({ filter, qos: code }, 'subscribed');
    // Images are optional: a broker whose ACL leaves them out still serves every request.
    const imageCode = grants?.[1]?.qos;
    if (imageFilter !== undefined && (imageCode === undefined || imageCode > 2)) {
      log.warn({ filter: imageFilter, code: imageCode }, 'the broker refused the image subscription: raw images will not arrive');
    }
    granted();
  });
}

/**
 * Resolves on the first CONNACK, or once the first attempt failed for the network (the
 * bridge starts unready and keeps trying: the broker may start after it). A broker that
 * refuses the connection (credentials, client id) rejects: retrying would not help.
 */
function firstConnection(client: MqttClient, url: string): Promise<void> {
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
    // The close before it reported the broker unreachable.
    const onOffline = (): void => {
      settle();
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
export function redactUrl(url: string): string {
  const parsed = new URL(url);
  parsed.username = '';
  parsed.password = '';
  return parsed.toString();
}
