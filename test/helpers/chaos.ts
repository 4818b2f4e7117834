// Helpers for the chaos tests (test/chaos/): devices with persistent sessions that keep
// reconnecting to a fixed port, a ledger of what was acknowledged and answered, and small
// probes (readiness, waiting for a condition), and the scene each test file cleans up.
import type { Redis } from 'ioredis';
import mqtt, { type MqttClient } from 'mqtt';
import { afterAll, afterEach } from 'vitest';
import { topics } from '../../contract/index.js';
import type { ServiceProcess } from '../../device-sim/service-process.js';
import type { UpstreamSim } from '../../upstream-sim/sim.js';
import { deletePrefix } from './redis.js';

/** What one chaos test started: all stopped after it, whatever happened (chaosScene). */
export interface ChaosScene {
  /** The test's Redis key prefix; its keys are deleted after the test. */
  prefix: string;
  services: ServiceProcess[];
  devices: ChaosDevice[];
  upstream: UpstreamSim | undefined;
  /** More to stop after the upstream (a broker, a proxy), in this order. */
  closers: Array<() => Promise<unknown>>;
}

/**
 * The file's scene, emptied after each test: devices closed, services continued (one may be
 * SIGSTOPped) and killed, the upstream and the closers stopped, the prefix's keys deleted;
 * `redis` is disconnected after the last test.
 */
export function chaosScene(redis: Redis): ChaosScene {
  const empty = (): ChaosScene => ({ prefix: '', services: [], devices: [], upstream: undefined, closers: [] });
  const scene = empty();
  afterEach(async () => {
    const { prefix, services, devices, upstream, closers } = scene;
    Object.assign(scene, empty());
    await Promise.all(devices.map((d) => d.close().catch(() => undefined)));
    for (const s of services) if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGCONT');
    await Promise.all(services.map((s) => s.stop('SIGKILL')));
    await upstream?.close();
    for (const close of closers) await close();
    if (prefix) await deletePrefix(redis, prefix);
  });
  afterAll(() => redis.disconnect());
  return scene;
}

/** What a device saw on its result topic, kept raw enough that a malformed reply is visible too. */
export interface SeenReply {
  id: string | null;
  ok: boolean;
  code: string | undefined;
  at: number;
  raw: string;
}

export interface ChaosDevice {
  client: MqttClient;
  deviceId: string;
  replies: SeenReply[];
  /** Resolves on PUBACK (QoS 1): "acknowledged". */
  publish(priority: string, payload: unknown): Promise<void>;
  close(): Promise<void>;
}

export interface ChaosDeviceOptions {
  /** clean=false keeps the session (subscription, queued QoS 1 replies) across reconnects. */
  clean?: boolean;
  /** 0 = never reconnect. */
  reconnectPeriod?: number;
  /** AUTH_FILE credentials. */
  username?: string;
  password?: string;
}

/**
 * A device on `127.0.0.1:{port}` with a fixed client id, subscribed QoS 1 to its result
 * topic. The message listener is in place before CONNACK, so replies queued in its session
 * while it was away are not missed. With reconnectPeriod > 0 mqtt.js reconnects by itself
 * (to the same port) and resends its unacknowledged QoS 1 publishes.
 */
export async function connectChaosDevice(port: number, clientId: string, options: ChaosDeviceOptions = {}): Promise<ChaosDevice> {
  const client = mqtt.connect(`mqtt://127.0.0.1:${port}`, {
    clientId,
    clean: options.clean ?? false,
    reconnectPeriod: options.reconnectPeriod ?? 200,
    connectTimeout: 2000,
    keepalive: 30,
    ...(options.username === undefined ? {} : { username: options.username, password: options.password }),
  });
  const deviceId = clientId.split('.')[0] as string;
  const replies: SeenReply[] = [];
  client.on('message', (topic, payload) => {
    if (topic !== topics.result(deviceId)) return;
    const raw = payload.toString();
    let parsed: { id?: unknown; ok?: unknown; error?: { code?: unknown } } = {};
    try {
      parsed = JSON.parse(raw) as typeof parsed;
    } catch {
      // kept as raw; `ok` false and no code makes it fail any assertion on codes
    }
    replies.push({
      id: typeof parsed.id === 'string' ? parsed.id : null,
      ok: parsed.ok === true,
      code: typeof parsed.error?.code === 'string' ? parsed.error.code : undefined,
      at: Date.now(),
      raw,
    });
  });
  client.on('error', () => undefined); // reconnect errors while the broker is down are expected
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${clientId}: no CONNACK within 5 s`)), 5000);
    client.once('connect', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  const granted = await client.subscribeAsync(topics.result(deviceId), { qos: 1 });
  if (granted[0]?.qos !== 1) throw new Error(`${clientId}: subscription granted ${String(granted[0]?.qos)}`);
  return {
    client,
    deviceId,
    replies,
    async publish(priority, payload) {
      await client.publishAsync(`devices/${deviceId}/infer/${priority}`, JSON.stringify(payload), { qos: 1 });
    },
    close: () => client.endAsync(true).then(() => undefined),
  };
}

/** `count` devices `{name}-{i}` on `port`, with persistent sessions that reconnect every 200 ms, kept in the scene. */
export async function persistentDevices(scene: ChaosScene, port: number, name: string, count: number): Promise<ChaosDevice[]> {
  const devices = await Promise.all(Array.from({ length: count }, (_, i) => connectChaosDevice(port, `${name}-${i}`, { clean: false, reconnectPeriod: 200 })));
  scene.devices.push(...devices);
  return devices;
}

export { waitUntil } from './wait.js';

/** What a steady load sent: each id's device and send time, and which ids were acknowledged. */
export interface LoadLedger {
  sent: Map<string, { device: ChaosDevice; at: number }>;
  acknowledged: Set<string>;
  /** Stops sending; resolves once the loop has ended. */
  stop(): Promise<void>;
  /** Replies the device of `id` saw for it. */
  repliesOf(id: string): SeenReply[];
}

/**
 * Sends `normal` requests round-robin over `devices`, one every `everyMs`, until stopped. Each
 * id is also the question, so a second upstream call for one id would give a second answer.
 */
export function steadyLoad(devices: ChaosDevice[], everyMs: number): LoadLedger {
  const sent: LoadLedger['sent'] = new Map();
  const acknowledged = new Set<string>();
  let sending = true;
  const loop = (async () => {
    for (let n = 0; sending; n += 1) {
      const device = devices[n % devices.length] as ChaosDevice;
      const id = `${device.deviceId}-r${n}`;
      sent.set(id, { device, at: Date.now() });
      device.publish('normal', { id, messages: [{ role: 'user', content: id }] }).then(
        () => acknowledged.add(id),
        () => undefined, // never acknowledged: not counted
      );
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  })();
  return {
    sent,
    acknowledged,
    async stop() {
      sending = false;
      await loop;
    },
    repliesOf: (id) => sent.get(id)?.device.replies.filter((r) => r.id === id) ?? [],
  };
}

/** GET /readyz: the HTTP status, or 0 when the request failed. */
export async function readyz(httpPort: number): Promise<number> {
  try {
    const res = await fetch(`http://127.0.0.1:${httpPort}/readyz`, { signal: AbortSignal.timeout(1000) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

/** Calls counted by the upstream per request id (the tests put the id in the message content). */
export function upstreamCallsById(requests: Array<{ body: unknown }>): Map<string, number> {
  const counts = new Map<string, number>();
  for (const r of requests) {
    const body = r.body as { messages?: Array<{ content?: unknown }> } | null;
    const content = body?.messages?.[0]?.content;
    if (typeof content === 'string') counts.set(content, (counts.get(content) ?? 0) + 1);
  }
  return counts;
}
