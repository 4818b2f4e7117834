// One phase of a bench that sends requests at a fixed rate to a fresh bridge process: the
// bridge started with `env`, MQTT 3.1.1 devices connected and subscribed to their results,
// requests sent on the pacing schedule, the last answers waited for, then the bridge's CPU per
// recorded request and each request's outcome. Used by bench:images and bench:scada.
import mqtt, { type MqttClient } from 'mqtt';
import { startServiceProcess } from '../device-sim/service-process.js';
import { cpuSeconds } from './proc.js';
import { drain, paced } from './pacing.js';
import { pct } from './runs-table.js';

const WARMUP_S = 2;
const DRAIN_MS = 10_000;

export interface Sample {
  at: number;
  done?: number;
  ok?: boolean;
  code?: string;
  /** The ok reply carried `data` (a typed answer). */
  data?: boolean;
  recorded: boolean;
}

export interface PhaseOptions {
  /** The bridge's environment (BENCH_BRIDGE names another build's main.js). */
  env: Record<string, string>;
  deviceIds: string[];
  rate: number;
  seconds: number;
  /** Request ids are `{tag}-{i}`. */
  tag: string;
  /** What device `deviceId` publishes as request `id`, the i-th of the phase. */
  message(i: number, deviceId: string, id: string, recorded: boolean): { topic: string; payload: Buffer | string };
}

export interface PhaseResult {
  recorded: Sample[];
  cpuUsPerRequest: number;
}

export const WARMUP_SECONDS = WARMUP_S;

/**
 * Limits far above the offered rate, no cache, no event-loop guard: nothing waits for a limit
 * or is refused, so every request is measured.
 */
export const MEASURED_ENV: Readonly<Record<string, string>> = {
  OVERLOAD_DELAY_MS: '0',
  RATE_LIMIT_RPM: '10000000',
  DEVICE_RATE_LIMIT_RPM: '10000000',
  MAX_CONCURRENCY: '512',
  CACHE_TTL_S: '0',
};

async function connect(port: number, id: string, samples: Map<string, Sample>): Promise<MqttClient> {
  const c = mqtt.connect(`mqtt://127.0.0.1:${port}`, { clientId: id, protocolVersion: 4, reconnectPeriod: 0 });
  await new Promise<void>((resolve, reject) => {
    c.once('connect', () => resolve());
    c.once('error', reject);
  });
  c.on('message', (_topic, payload) => {
    const reply = JSON.parse(payload.toString()) as { id: string; ok: boolean; data?: unknown; error?: { code?: string } };
    const s = samples.get(reply.id);
    if (s === undefined || s.done !== undefined) return;
    s.done = performance.now() - s.at;
    s.ok = reply.ok;
    s.data = reply.data !== undefined;
    s.code = reply.error?.code;
  });
  await c.subscribeAsync(`devices/${id}/result`, { qos: 1 });
  return c;
}

export async function runPhase(o: PhaseOptions): Promise<PhaseResult> {
  const service = await startServiceProcess(o.env, process.env.BENCH_BRIDGE ? { script: process.env.BENCH_BRIDGE } : {});
  const samples = new Map<string, Sample>();
  const devices: MqttClient[] = [];
  try {
    devices.push(...(await Promise.all(o.deviceIds.map((id) => connect(service.mqttPort, id, samples)))));
    const pid = service.child.pid as number;
    let cpuAt = 0;
    await paced(o.rate, WARMUP_S, o.seconds, (i, recorded) => {
      if (recorded && cpuAt === 0) cpuAt = cpuSeconds(pid);
      const device = devices[i % devices.length] as MqttClient;
      const id = `${o.tag}-${i}`;
      const { topic, payload } = o.message(i, device.options.clientId as string, id, recorded);
      samples.set(id, { at: performance.now(), recorded });
      device.publish(topic, payload, { qos: 1 });
    });
    const recorded = [...samples.values()].filter((s) => s.recorded);
    await drain(recorded, DRAIN_MS);
    return { recorded, cpuUsPerRequest: ((cpuSeconds(pid) - cpuAt) * 1e6) / recorded.length };
  } finally {
    for (const d of devices) d.end(true);
    await service.stop('SIGTERM');
  }
}

/** The figures every paced bench reports, and the error codes logged on stderr. */
export function outcomeFigures({ recorded, cpuUsPerRequest }: PhaseResult, tag: string): Record<string, number> {
  const ok = recorded.filter((s) => s.ok === true).map((s) => s.done as number);
  const codes = new Map<string, number>();
  for (const s of recorded) if (s.code !== undefined) codes.set(s.code, (codes.get(s.code) ?? 0) + 1);
  if (codes.size > 0) process.stderr.write(`${tag}: error replies by code: ${[...codes].map(([c, n]) => `${c} ${n}`).join(', ')}\n`);
  return {
    'bridge CPU per request, µs': cpuUsPerRequest,
    'reply p50': pct(ok, 0.5),
    'reply p99': pct(ok, 0.99),
    'lost (no reply)': recorded.filter((s) => s.done === undefined).length,
    'error replies': recorded.filter((s) => s.ok === false).length,
  };
}

/** `runCount` runs of every column in turn (each measured by `measure`), logged on stderr as they come. */
export async function alternatingRuns(
  runCount: number,
  columns: string[],
  measure: (column: string, run: number) => Promise<Record<string, number>>,
): Promise<Array<Map<string, Record<string, number>>>> {
  const runs: Array<Map<string, Record<string, number>>> = [];
  for (let run = 0; run < runCount; run += 1) {
    const out = new Map<string, Record<string, number>>();
    for (const column of columns) {
      const figures = await measure(column, run);
      process.stderr.write(
        `run ${run + 1}, ${column}: ${Object.entries(figures)
          .map(([k, v]) => `${k} ${Math.round(v * 10) / 10}`)
          .join(', ')}\n`,
      );
      out.set(column, figures);
    }
    runs.push(out);
  }
  return runs;
}
