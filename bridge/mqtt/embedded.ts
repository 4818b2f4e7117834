// The broker port over the embedded Aedes broker: admission runs inside its
// authorizePublish, so a request's PUBACK is sent only once it is admitted.
import type { Logger } from 'pino';
import { startBroker, type Broker, type BrokerConfig, type BrokerOptions } from '../../broker/broker.js';
import type { ClusterPlugins } from '../../broker/cluster.js';
import { deviceIdOfClientId, type RequestHandler } from '../../contract/index.js';
import type { MqttPort } from './port.js';

export interface EmbeddedPort extends MqttPort {
  readonly mode: 'embedded';
  readonly broker: Broker;
  /** Called with a device id when its last connection to this instance closes (Sparkplug DDEATH). */
  onDeviceGone(listener: (deviceId: string) => void): void;
}

export async function openEmbedded(
  config: BrokerConfig,
  onRequest: RequestHandler,
  logger: Logger,
  plugins: ClusterPlugins | undefined,
  options: BrokerOptions = {},
): Promise<EmbeddedPort> {
  const broker = await startBroker(config, onRequest, logger, plugins, options);
  // Keyed by client id: a session taken over by a new connection with the same id must not
  // be forgotten when the old one closes.
  const clients = new Map<string, object>();
  broker.aedes.on('client', (client) => clients.set(client.id, client));
  const goneListeners: Array<(deviceId: string) => void> = [];
  broker.aedes.on('clientDisconnect', (client) => {
    if (clients.get(client.id) !== client) return;
    clients.delete(client.id);
    const deviceId = deviceIdOfClientId(client.id);
    if (deviceId === null || goneListeners.length === 0) return;
    // A device may hold several sessions (`id` and `id.*`): gone once the last one closed.
    for (const id of clients.keys()) if (deviceIdOfClientId(id) === deviceId) return;
    for (const listener of goneListeners) listener(deviceId);
  });
  return {
    mode: 'embedded',
    broker,
    publish: broker.publish,
    connected: () => true,
    clientIds: () => [...clients.keys()],
    clientCount: () => clients.size,
    refusals: () => broker.refusals,
    ports: {
      mqtt: broker.mqttPort,
      ...(broker.tlsPort === undefined ? {} : { mqttTls: broker.tlsPort }),
      ...(broker.wsPort === undefined ? {} : { mqttWs: broker.wsPort }),
    },
    reloadAuth: () => void broker.reloadAuth(),
    // Devices keep their connections until close(); intake answers their requests `unavailable`.
    quiesce: async () => {},
    close: () => broker.close(),
    onDeviceGone: (listener) => void goneListeners.push(listener),
  };
}
