// Starts a real bridge (admin HTTP, memory store) against the upstream simulator, with its
// embedded broker on a free TCP port or joined to a real Mosquitto of its own (`mode:
// 'external'`), and gives tests MQTT devices (3.1.1 or 5) that talk to that broker over TCP.
import mqtt, { type IPublishPacket, type MqttClient } from 'mqtt';
import { startBridge, type BridgeOptions, type RunningBridge } from '../../bridge/app.js';
import { loadConfig } from '../../bridge/config/config.js';
import { ReplySchema, topics, type OkReply, type Priority, type Reply } from '../../contract/index.js';
import { createLogger } from '../../bridge/logger.js';
import type { Store } from '../../bridge/store/port.js';
import { startUpstreamSim, type UpstreamSim, type UpstreamSimOptions } from '../../upstream-sim/sim.js';
import { startMosquitto, type Mosquitto, type MosquittoOptions } from './mosquitto.js';

/** Where the devices connect: the bridge's own broker, or the plant's broker it joined. */
export type BrokerMode = 'embedded' | 'external';
export const BROKER_MODES: BrokerMode[] = ['embedded', 'external'];

export interface Harness {
  bridge: RunningBridge;
  upstream: UpstreamSim;
  /** The broker the devices connect to. */
  url: string;
  mode: BrokerMode;
  /** The Mosquitto the bridge joined, in external mode. */
  mosquitto: Mosquitto | undefined;
  device(clientId: string, options?: DeviceOptions): Promise<Device>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  /**
   * An upstream simulator to use instead of starting one (several bridges sharing one
   * upstream); `sim` is then ignored, and close() leaves it running for its owner.
   */
  upstream?: UpstreamSim;
  /** Default `embedded`; `external` starts a Mosquitto and points BROKER_URL at it. */
  mode?: BrokerMode;
  /** startBridge's options (tick intervals). */
  bridge?: BridgeOptions;
  /**
   * External mode: how that Mosquitto is set up (users, ACL…). With users, give the bridge its
   * own in `env` (BROKER_USERNAME, BROKER_PASSWORD).
   */
  mosquitto?: MosquittoOptions;
}

export async function startHarness(
  env: Record<string, string> = {},
  sim: Partial<UpstreamSimOptions> = {},
  store?: Store,
  options: HarnessOptions = {},
): Promise<Harness> {
  const ownsUpstream = options.upstream === undefined;
  const upstream = options.upstream ?? (await startUpstreamSim({ port: 0, latencyMs: 5, ...sim }));
  // Load shedding off unless a test asks for it: on a busy CI machine a slow event loop would
  // shed requests that tests of other features expect to be answered.
  const mode = options.mode ?? 'embedded';
  const mosquitto = mode === 'external' ? await startMosquitto(options.mosquitto) : undefined;
  const brokerEnv = mosquitto ? { BROKER_URL: mosquitto.url } : {};
  const config = loadConfig({ MQTT_PORT: '0', HTTP_PORT: '0', LOG_LEVEL: 'silent', OVERLOAD_DELAY_MS: '0', ...brokerEnv, ...env });
  const logger = createLogger(config.logLevel);
  const bridge = await startBridge({ ...config, upstreamUrl: env.UPSTREAM_URL ?? upstream.url }, logger, store, options.bridge);
  const url = mosquitto?.url ?? `mqtt://127.0.0.1:${bridge.mqttPort}`;
  const devices: Device[] = [];
  return {
    bridge,
    upstream,
    url,
    mode,
    mosquitto,
    async device(clientId, deviceOptions) {
      const device = await connectDevice(url, clientId, deviceOptions);
      devices.push(device);
      return device;
    },
    async close() {
      await Promise.all(devices.map((d) => d.close()));
      await bridge.shutdown();
      await mosquitto?.close();
      if (ownsUpstream) await upstream.close();
    },
  };
}

export interface DeviceOptions {
  /** 4 = MQTT 3.1.1 (default), 5 = MQTT 5. */
  protocolVersion?: 4 | 5;
}

export interface Device {
  client: MqttClient;
  deviceId: string;
  /** Every reply received on the device's result topic, in order. */
  replies: Reply[];
  /** Every PUBLISH the device received, on any topic it subscribed to, with its properties. */
  packets: IPublishPacket[];
  publish(priority: Priority | string, payload: unknown, qos?: 0 | 1 | 2): Promise<void>;
  /** Waits for `count` replies with this id (default 1) and returns them. */
  reply(id: string | null, options?: { count?: number; timeoutMs?: number }): Promise<Reply[]>;
  close(): Promise<void>;
}

export async function connectDevice(url: string, clientId: string, options: DeviceOptions = {}): Promise<Device> {
  const client = await mqtt.connectAsync(url, { clientId, reconnectPeriod: 0, clean: true, protocolVersion: options.protocolVersion ?? 4 });
  const deviceId = clientId.split('.')[0] as string;
  const replies: Reply[] = [];
  const packets: IPublishPacket[] = [];
  const waiters = new Set<() => void>();
  client.on('message', (topic, payload, packet) => {
    packets.push(packet);
    if (topic !== topics.result(deviceId)) return;
    replies.push(ReplySchema.parse(JSON.parse(payload.toString())));
    for (const wake of waiters) wake();
  });
  const granted = await client.subscribeAsync(topics.result(deviceId), { qos: 1 });
  if (granted[0]?.qos === 128) throw new Error(`subscription to ${topics.result(deviceId)} refused`);
  return {
    client,
    deviceId,
    replies,
    packets,
    async publish(priority, payload, qos = 1) {
      const body = Buffer.isBuffer(payload) || typeof payload === 'string' ? payload : JSON.stringify(payload);
      await client.publishAsync(`devices/${deviceId}/infer/${priority}`, body, { qos });
    },
    reply(id, { count = 1, timeoutMs = 5000 } = {}) {
      const matching = (): Reply[] => replies.filter((r) => r.id === id);
      return new Promise((resolve, reject) => {
        const check = (): void => {
          const found = matching();
          if (found.length < count) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(found);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`device ${deviceId}: ${matching().length}/${count} replies for id ${String(id)} after ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close: () => client.endAsync(),
  };
}

export const ask = (id: string, content = `question ${id}`, extra: Record<string, unknown> = {}) => ({
  id,
  messages: [{ role: 'user', content }],
  ...extra,
});

/** The reply as an ok reply, or a failure that shows what came instead. */
export function okOf(reply: Reply | undefined): OkReply {
  if (!reply?.ok) throw new Error(`expected an ok reply, got ${JSON.stringify(reply)}`);
  return reply;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The SUBACK return codes for these filters, in order (mqtt.js rejects when any is 128). */
export async function subscribeGranted(client: MqttClient, filters: string[]): Promise<number[]> {
  try {
    const granted = await client.subscribeAsync(Object.fromEntries(filters.map((f) => [f, { qos: 1 as const }])));
    return granted.map((g) => g.qos);
  } catch (err) {
    const granted = (err as { packet?: { granted?: number[] } }).packet?.granted;
    if (!granted) throw err;
    return granted;
  }
}
