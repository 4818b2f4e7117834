// The Sparkplug Edge Node's way into MQTT (scada/sparkplug/link.ts). Plant's
// broker: one dedicated connection per session, its Will the NDEATH (QoS 1, not retained), a
// clean start and no automatic reconnect (a new session needs a new bdSeq in its Will).
// Embedded broker: publishes and subscriptions on the in-process Aedes; no Will.
import { readFileSync } from 'node:fs';
import mqtt, { type MqttClient } from 'mqtt';
import type { Logger } from 'pino';
import type { Broker } from '../../broker/broker.js';
import type { SparkplugLink } from '../scada/sparkplug/link.js';
import type { ExternalBrokerOptions } from './external-connection.js';

const CONNECT_TIMEOUT_MS = 10_000;
const KEEPALIVE_S = 30;

/** The plant's broker, with the bridge's URL, credentials and TLS, under `clientId`. */
export function externalNodeLink(options: ExternalBrokerOptions, clientId: string, log: Logger): SparkplugLink {
  const read = (path: string | undefined): Buffer | undefined => (path === undefined ? undefined : readFileSync(path));
  return {
    willOutlivesProcess: true,
    async open(will, filters, handlers) {
      const client = mqtt.connect(options.brokerUrl, {
        clientId,
        protocolVersion: 5,
        clean: true,
        username: options.brokerUsername,
        password: options.brokerPassword,
        ca: read(options.brokerCaFile),
        cert: read(options.brokerCertFile),
        key: read(options.brokerKeyFile),
        reconnectPeriod: 0,
        connectTimeout: CONNECT_TIMEOUT_MS,
        keepalive: KEEPALIVE_S,
        // A message of an ended session must never reach the next one (its seq would be wrong).
        queueQoSZero: false,
        will: { topic: will.topic, payload: will.payload, qos: 1, retain: false },
      });
      try {
        await connected(client);
        await client.subscribeAsync(filters, { qos: 1 });
      } catch (err) {
        client.end(true);
        throw err;
      }
      let ending = false;
      client.on('message', (topic, payload) => handlers.message(topic, payload));
      client.on('error', (err) => log.warn({ err: err.message }, 'sparkplug connection error'));
      client.once('close', () => {
        if (!ending) handlers.lost();
      });
      return {
        publish: async (topic, payload) => {
          await client.publishAsync(topic, payload, { qos: 0, retain: false });
        },
        async end(death) {
          ending = true;
          if (death === undefined) {
            // No DISCONNECT: the broker sends the Will, the NDEATH of this session.
            client.end(true);
            return;
          }
          await client.publishAsync(death.topic, death.payload, { qos: 1, retain: false }).catch(() => undefined);
          await client.endAsync();
        },
      };
    },
  };
}

function connected(client: MqttClient): Promise<void> {
  return new Promise((resolve, reject) => {
    client.once('connect', () => {
      client.off('error', reject);
      resolve();
    });
    client.once('error', reject);
    client.once('close', () => reject(new Error('connection closed before CONNACK')));
  });
}

/** The embedded broker: retained messages on a filter (a host's STATE) are delivered on subscribe. */
export function embeddedNodeLink(broker: Broker): SparkplugLink {
  const { aedes } = broker;
  // Aedes' types leave its persistence out; its retained stream is an async iterable.
  const retained = (filter: string): AsyncIterable<{ topic: string; payload: Buffer }> =>
    (
      aedes as unknown as { persistence: { createRetainedStream(f: string): AsyncIterable<{ topic: string; payload: Buffer }> } }
    ).persistence.createRetainedStream(filter);
  return {
    willOutlivesProcess: false,
    async open(_will, filters, handlers) {
      const deliver = (packet: { topic: string; payload: Buffer | string }, done: () => void): void => {
        handlers.message(packet.topic, Buffer.from(packet.payload));
        done();
      };
      for (const filter of filters) {
        await new Promise<void>((resolve) => aedes.subscribe(filter, deliver, resolve));
        for await (const packet of retained(filter)) {
          deliver(packet, () => undefined);
        }
      }
      const publish = (topic: string, payload: Buffer, qos: 0 | 1): Promise<void> => broker.publish(topic, payload, { qos, retain: false });
      return {
        publish: (topic, payload) => publish(topic, payload, 0),
        async end(death) {
          for (const filter of filters) await new Promise<void>((resolve) => aedes.unsubscribe(filter, deliver, resolve));
          if (death) await publish(death.topic, death.payload, 1);
        },
      };
    },
  };
}
