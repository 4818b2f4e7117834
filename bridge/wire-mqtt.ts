// The MQTT side of the composition root: the embedded broker, or the plant's broker joined as
// a client (BROKER_URL), opened with its closer pushed.
import type { Broker } from '../broker/broker.js';
import { topics, type RequestHandler } from '../contract/index.js';
import type { Closers } from './closers.js';
import type { Config } from './config/config.js';
import type { Coordination } from './coordination.js';
import type { Identity } from './core.js';
import type { Logger } from './logger.js';
import { openEmbedded } from './mqtt/embedded.js';
import { openExternal } from './mqtt/external.js';
import type { MqttPort } from './mqtt/port.js';
import { statusMessage } from './ops/status.js';
import type { RepeatingLogOptions } from './repeating-log.js';
import { scadaObserverTopics } from './wire-scada.js';

/** The embedded broker, or the plant's broker joined as a client (BROKER_URL). */
export async function openMqtt(
  config: Config,
  identity: Identity,
  onRequest: RequestHandler,
  log: Logger,
  coordination: Coordination,
  repeatLog: RepeatingLogOptions,
  closers: Closers,
): Promise<MqttPort & { broker?: Broker }> {
  const mqtt = await connectMqtt(config, identity, onRequest, log, coordination, repeatLog);
  closers.push('mqtt', () => mqtt.close());
  return mqtt;
}

async function connectMqtt(
  config: Config,
  { instanceId, since }: Identity,
  onRequest: RequestHandler,
  log: Logger,
  coordination: Coordination,
  repeatLog: RepeatingLogOptions,
): Promise<MqttPort & { broker?: Broker }> {
  const { brokerUrl } = config;
  if (brokerUrl === undefined) {
    try {
      // A CONNECT while Redis is unreachable is refused at once rather than left waiting for the sessions.
      const brokerConfig = { ...config, observerTopics: scadaObserverTopics(config) };
      return await openEmbedded(brokerConfig, onRequest, log, coordination.plugins, { available: () => coordination.healthy() });
    } catch (err) {
      await coordination.plugins?.close(); // the broker owns the plugins only once it started
      throw err;
    }
  }
  // With a liveness lease another instance adopts what a crashed start left (wire-adoption.ts).
  if (config.instanceId === undefined && (coordination.sessions === undefined || config.brokerAdoptAfterMs === 0)) {
    log.warn(
      'INSTANCE_ID is not set: this start joins the broker under a new client id, so what the previous one left unacknowledged in its session waits there until BROKER_SESSION_EXPIRY_S; set a stable INSTANCE_ID',
    );
  }
  const status = { online: statusMessage('online', instanceId, since), offline: statusMessage('offline', instanceId, since) };
  return openExternal({ ...config, brokerUrl }, instanceId, { topic: topics.status(instanceId), ...status }, onRequest, log, repeatLog);
}
