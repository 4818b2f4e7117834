// The benchmark's plant systems (plant-x1, -x2, -x3): the bridge in its external-broker mode.
// One private Mosquitto, N bridge instances joined to it with BROKER_URL (distinct INSTANCE_IDs,
// one REDIS_PREFIX, so one shared subscription `$share/edge-ai-bridge/devices/+/infer/+` splits
// the requests between them) and the fleet connected to Mosquitto, not to any bridge.
import { setTimeout as sleep } from 'node:timers/promises';
import { startServiceProcess, type ServiceProcess } from '../device-sim/service-process.js';
import { startPrivateMosquitto, type PrivateMosquitto } from './mosquitto-server.js';

export interface Plant {
  mosquitto: PrivateMosquitto;
  /** The bridge instances, in INSTANCE_ID order. */
  services: ServiceProcess[];
  /** Where the devices connect: Mosquitto's port. */
  ports: number[];
  stop(): Promise<void>;
}

export interface PlantOptions {
  instances: number;
  /** Every bridge's environment (UPSTREAM_URL, REDIS_URL, REDIS_PREFIX, limits); BROKER_URL and INSTANCE_ID are added. */
  env: Record<string, string>;
  /** Names the instances `${name}-1` … */
  name: string;
  nodeArgs?: string[];
}

/** A bridge is "ready" before its shared subscription is granted; requests only arrive after. */
const SUBSCRIBED_MS = 15_000;

export async function startPlant(options: PlantOptions): Promise<Plant> {
  // BENCH_MOSQUITTO_CONFIG: extra config lines separated by `;`, to try a broker setting.
  const extraConfig = (process.env.BENCH_MOSQUITTO_CONFIG ?? '')
    .split(';')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  const mosquitto = await startPrivateMosquitto({ extraConfig });
  const services: ServiceProcess[] = [];
  const stop = async (): Promise<void> => {
    // Bridges first: on SIGTERM each unsubscribes and admits what it was already handed.
    await Promise.all(services.map((s) => s.stop()));
    await mosquitto.stop();
  };
  try {
    for (let i = 1; i <= options.instances; i += 1) {
      // BENCH_BROKER_CONNECTIONS: try another BROKER_CONNECTIONS than the bridge's default.
      const connections = process.env.BENCH_BROKER_CONNECTIONS;
      const env = {
        ...options.env,
        ...(connections ? { BROKER_CONNECTIONS: connections } : {}),
        BROKER_URL: mosquitto.url,
        INSTANCE_ID: `${options.name}-${i}`,
      };
      services.push(await startServiceProcess(env, { nodeArgs: options.nodeArgs ?? [] }));
    }
    await Promise.all(services.map((s) => subscribed(s)));
  } catch (err) {
    await stop();
    throw err;
  }
  return { mosquitto, services, ports: [mosquitto.port], stop };
}

/** Waits for the bridge's `subscribed` log line and its /readyz answering 200. */
async function subscribed(service: ServiceProcess): Promise<void> {
  const deadline = Date.now() + SUBSCRIBED_MS;
  while (Date.now() < deadline) {
    if (service.logs.some((entry) => entry.msg === 'subscribed')) {
      const res = await fetch(`http://127.0.0.1:${service.httpPort}/readyz`).catch(() => undefined);
      await res?.body?.cancel();
      if (res?.status === 200) return;
    }
    await sleep(50);
  }
  throw new Error(`bridge on http ${service.httpPort} not subscribed to the plant's broker after ${SUBSCRIBED_MS} ms: ${service.stderr()}`);
}
