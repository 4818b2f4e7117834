// A Sparkplug host's view for the tests: every message under spBv1.0/{group}/#, decoded with
// sparkplug-payload (Int64 and seq as numbers), and the host's own NCMD and STATE publishes.
// Every message also goes through scada-sim's SessionChecker, the verdict a Sparkplug host
// would reach on the session: a test asserts `violations()` is empty.
import { createRequire } from 'node:module';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { REBIRTH_METRIC } from '../../contract/index.js';
import { SessionChecker, type Violation } from '../../scada-sim/check.js';
import { runScadaSim, type ScadaSimReport } from '../../scada-sim/cli.js';
import { eventually } from './wait.js';

const codec = createRequire(import.meta.url)('sparkplug-payload').get('spBv1.0') as {
  encodePayload(p: unknown): Uint8Array;
  decodePayload(b: Uint8Array): { timestamp?: unknown; seq?: unknown; metrics?: Array<Record<string, unknown>> };
};

export interface SeenMetric {
  name?: string;
  alias?: number;
  type: string;
  value: unknown;
  timestamp?: number;
  isNull?: boolean;
}

export interface Seen {
  topic: string;
  type: string;
  device: string | undefined;
  seq: number | undefined;
  timestamp: number | undefined;
  metrics: SeenMetric[];
  qos: number;
  retain: boolean;
  /** When the observer received it (Date.now()). */
  atMs: number;
}

const num = (v: unknown): number | undefined => (v === undefined || v === null ? undefined : Number(v));

function decode(topic: string, payload: Buffer, qos: number, retain: boolean): Seen {
  const [, , type, , device] = topic.split('/');
  const p = codec.decodePayload(payload);
  const metrics = (p.metrics ?? []).map((m) => {
    const out: SeenMetric = { type: String(m.type), value: typeof m.value === 'object' && m.value !== null ? Number(m.value) : m.value };
    if (m.name !== undefined && m.name !== null) out.name = String(m.name);
    if (m.alias !== undefined && m.alias !== null) out.alias = Number(m.alias);
    if (m.timestamp !== undefined && m.timestamp !== null) out.timestamp = Number(m.timestamp);
    if (m.isNull) out.isNull = true;
    return out;
  });
  return { topic, type: type as string, device, seq: num(p.seq), timestamp: num(p.timestamp), metrics, qos, retain, atMs: Date.now() };
}

export interface Observer {
  client: MqttClient;
  seen: Seen[];
  /** scada-sim's checker, fed every message the observer received. */
  checker: SessionChecker;
  /** The checker's violations so far (an empty list: the session was sound). */
  violations(): Violation[];
  of(type: string, device?: string): Seen[];
  /** Waits until `count` messages of `type` (for `device`) were seen; returns them all. */
  wait(type: string, count?: number, device?: string, timeoutMs?: number): Promise<Seen[]>;
  rebirth(group: string, node: string): Promise<void>;
  state(hostId: string, online: boolean, timestamp: number): Promise<void>;
  close(): Promise<void>;
}

export async function observe(url: string, group: string, options: IClientOptions = {}): Promise<Observer> {
  const client = await mqtt.connectAsync(url, { clientId: `host-${Math.random().toString(16).slice(2, 8)}`, reconnectPeriod: 0, ...options });
  const seen: Seen[] = [];
  const checker = new SessionChecker();
  client.on('message', (topic, payload, packet) => {
    if (topic.startsWith('spBv1.0/STATE/')) return;
    checker.feed(topic, payload, packet.retain);
    seen.push(decode(topic, payload, packet.qos, packet.retain));
  });
  await client.subscribeAsync(`spBv1.0/${group}/#`, { qos: 1 });
  const of = (type: string, device?: string): Seen[] => seen.filter((s) => s.type === type && (device === undefined || s.device === device));
  return {
    client,
    seen,
    checker,
    violations: () => [...checker.violations],
    of,
    async wait(type, count = 1, device, timeoutMs = 8000) {
      await eventually(`${count} ${type} ${device ?? ''}`, () => of(type, device).length >= count, timeoutMs);
      return of(type, device);
    },
    async rebirth(g, node) {
      const payload = Buffer.from(codec.encodePayload({ timestamp: Date.now(), metrics: [{ name: REBIRTH_METRIC, type: 'Boolean', value: true }] }));
      await client.publishAsync(`spBv1.0/${g}/NCMD/${node}`, payload, { qos: 0 });
    },
    async state(hostId, online, timestamp) {
      await client.publishAsync(`spBv1.0/STATE/${hostId}`, JSON.stringify({ online, timestamp }), { qos: 1, retain: true });
    },
    close: () => client.endAsync(),
  };
}

/** The value of the metric named `name` (in a birth), or undefined. */
export const metricValue = (s: Seen, name: string): unknown => s.metrics.find((m) => m.name === name)?.value;

export interface ScadaSimRun {
  /** What it printed: one line per message, violation and rebirth request. */
  output(): string;
  /** Stops it as Ctrl-C would (once; later calls return the same result). */
  stop(): Promise<{ code: number; report?: ScadaSimReport }>;
}

/** The real scada-sim host, in process, once it is online (its STATE published). */
export async function scadaSim(args: string[]): Promise<ScadaSimRun> {
  let text = '';
  const out = { write: (t: string) => (text += t) };
  const abort = new AbortController();
  let ended = false;
  const run = runScadaSim(args, { stdout: out, stderr: out, signal: abort.signal }).finally(() => (ended = true));
  await eventually('scada-sim online', () => {
    if (ended) throw new Error(`scada-sim ended before it was online: ${text}`);
    return text.includes('STATE online');
  });
  return {
    output: () => text,
    stop: () => {
      abort.abort();
      return run;
    },
  };
}
