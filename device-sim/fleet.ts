// The device fleet: many MQTT connections sending requests at a fixed fleet-wide rate and
// matching replies by id, so the bridge can be measured end to end as devices see it.
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import {
  DEVICE_ID_PATTERN,
  type InferRequest,
  PRIORITIES,
  type Priority,
  ReplySchema,
  topics,
  UsageError,
} from '../contract/index.js';
import {
  buildReport,
  emptyTally,
  parseMix,
  pickPriority,
  recordFailure,
  recordLost,
  recordReply,
  recordSent,
  type FleetReport,
  type Mix,
  type ReportConfig,
} from './stats.js';

export type { FleetReport, Mix } from './stats.js';

export interface FleetOptions {
  /** mqtt://, mqtts://, ws:// or wss:// broker URL. */
  url: string;
  devices: number;
  /** Requests per second for the whole fleet. */
  rate: number;
  durationS: number;
  mix: Mix;
  qos: 0 | 1 | 2;
  username?: string;
  password?: string;
  /** A request with no reply this long after it was sent is lost; default 60000. */
  replyTimeoutMs?: number;
  /** Connections opened at once; default 50, so 1000 devices do not stampede the broker. */
  connectConcurrency?: number;
  /** Device ids are `${prefix}-${n}`; default `sim`. */
  prefix?: string;
  /** Seed for the priority picks, for reproducible runs; random by default. */
  seed?: number;
  /**
   * Draw each request's text from this many distinct questions, so identical requests recur
   * (to see the bridge's cache and coalescing at work); unset = every text distinct.
   */
  questions?: number;
  /** Progress lines (connecting, sending, waiting); the CLI sends them to stderr. */
  onProgress?: (line: string) => void;
}

export const FLEET_DEFAULTS = {
  url: 'mqtt://127.0.0.1:1883',
  devices: 10,
  rate: 10,
  durationS: 10,
  mix: 'critical=1,high=9,normal=80,low=10',
  qos: 1,
  replyTimeoutMs: 60_000,
  connectConcurrency: 50,
  prefix: 'sim',
} as const;

const MAX_DEVICES = 100_000;
const MAX_WORKERS = 64;
const MAX_IDLE = 1_000_000;
// Request ids are `${deviceId}-${seq}` and must stay within the contract's 64 characters.
const MAX_PREFIX_LENGTH = 32;
const END_GRACE_MS = 2_000;

interface Pending {
  priority: Priority;
  sentAt: number;
}

interface Device {
  id: string;
  client: MqttClient;
  pending: Map<string, Pending>;
  seq: number;
}

/** Small, fast, seedable PRNG (mulberry32): reproducible priority sequences for a given seed. */
function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

export function deviceIds(prefix: string, count: number): string[] {
  const width = String(count).length;
  return Array.from({ length: count }, (_, i) => `${prefix}-${String(i + 1).padStart(width, '0')}`);
}

/** The broker URL without credentials, fit for reports and logs. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString().replace(/\/$/, '');
  } catch {
    return url;
  }
}

/** Checks an options object (whether from the CLI or code); returns a message naming the bad option, or null. */
export function checkFleetOptions(opts: FleetOptions): string | null {
  let protocol: string;
  try {
    protocol = new URL(opts.url).protocol;
  } catch {
    return `--url: not a URL: "${opts.url}"`;
  }
  if (!['mqtt:', 'mqtts:', 'tcp:', 'tls:', 'ws:', 'wss:'].includes(protocol)) {
    return `--url: unsupported protocol "${protocol}" (use mqtt://, mqtts://, ws:// or wss://)`;
  }
  if (!(Number.isInteger(opts.devices) && opts.devices >= 1 && opts.devices <= MAX_DEVICES)) {
    return `--devices: must be an integer from 1 to ${MAX_DEVICES}, got ${opts.devices}`;
  }
  if (!(Number.isFinite(opts.rate) && opts.rate > 0)) return `--rate: must be a positive number, got ${opts.rate}`;
  if (!(Number.isFinite(opts.durationS) && opts.durationS > 0)) {
    return `--duration: must be a positive number of seconds, got ${opts.durationS}`;
  }
  if (![0, 1, 2].includes(opts.qos)) return `--qos: must be 0, 1 or 2, got ${opts.qos}`;
  if (PRIORITIES.every((p) => !(opts.mix[p] > 0))) return '--mix: at least one weight must be positive';
  const timeout = opts.replyTimeoutMs ?? FLEET_DEFAULTS.replyTimeoutMs;
  if (!(Number.isFinite(timeout) && timeout >= 0)) return `--reply-timeout: must be a non-negative number, got ${timeout / 1000}`;
  const concurrency = opts.connectConcurrency ?? FLEET_DEFAULTS.connectConcurrency;
  if (!(Number.isInteger(concurrency) && concurrency >= 1)) {
    return `--connect-concurrency: must be a positive integer, got ${concurrency}`;
  }
  const prefix = opts.prefix ?? FLEET_DEFAULTS.prefix;
  if (prefix.length > MAX_PREFIX_LENGTH || !DEVICE_ID_PATTERN.test(prefix)) {
    return `--prefix: must be 1 to ${MAX_PREFIX_LENGTH} characters of A-Za-z0-9_-, got "${prefix}"`;
  }
  if (opts.password !== undefined && opts.username === undefined) return '--password: needs --username too';
  return null;
}

export interface FleetArgs extends FleetOptions {
  /** Print the report as one JSON object instead of the table. */
  json: boolean;
  /** Idle devices (device-sim/idle.ts) to connect before the fleet runs; 0 = none. */
  idle: number;
  /** Worker threads for the fast fleet (device-sim/load.ts); 0 = the mqtt.js fleet in this thread. */
  workers: number;
}

function parseNumber(option: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--${option}: not a number: "${raw}"`);
  return n;
}

/**
 * Parses device-sim's command line (without the node and script entries), applies the
 * defaults and validates. Throws UsageError with a one-line message naming the option.
 */
export function parseFleetArgs(argv: readonly string[]): FleetArgs {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        url: { type: 'string' },
        devices: { type: 'string' },
        rate: { type: 'string' },
        duration: { type: 'string' },
        mix: { type: 'string' },
        qos: { type: 'string' },
        username: { type: 'string' },
        password: { type: 'string' },
        'reply-timeout': { type: 'string' },
        'connect-concurrency': { type: 'string' },
        prefix: { type: 'string' },
        seed: { type: 'string' },
        questions: { type: 'string' },
        json: { type: 'boolean' },
        idle: { type: 'string' },
        workers: { type: 'string' },
      },
    }));
  } catch (err) {
    // node's messages span several lines; the contract wants one.
    throw new UsageError((err instanceof Error ? err.message : String(err)).replace(/\s*\n\s*/g, ' '));
  }
  const str = (name: string): string | undefined => {
    const v = values[name];
    return typeof v === 'string' ? v : undefined;
  };

  let mix: Mix;
  try {
    mix = parseMix(str('mix') ?? FLEET_DEFAULTS.mix);
  } catch (err) {
    throw new UsageError(`--mix: ${err instanceof Error ? err.message : String(err)}`);
  }
  const qos = parseNumber('qos', str('qos'), FLEET_DEFAULTS.qos);
  const seedRaw = str('seed');
  const seed = seedRaw === undefined ? undefined : parseNumber('seed', seedRaw, 0);
  if (seed !== undefined && !Number.isInteger(seed)) throw new UsageError(`--seed: must be an integer, got "${seedRaw}"`);

  const opts: FleetArgs = {
    url: str('url') ?? FLEET_DEFAULTS.url,
    devices: parseNumber('devices', str('devices'), FLEET_DEFAULTS.devices),
    rate: parseNumber('rate', str('rate'), FLEET_DEFAULTS.rate),
    durationS: parseNumber('duration', str('duration'), FLEET_DEFAULTS.durationS),
    mix,
    qos: qos as FleetOptions['qos'],
    replyTimeoutMs: parseNumber('reply-timeout', str('reply-timeout'), FLEET_DEFAULTS.replyTimeoutMs / 1000) * 1000,
    connectConcurrency: parseNumber('connect-concurrency', str('connect-concurrency'), FLEET_DEFAULTS.connectConcurrency),
    prefix: str('prefix') ?? FLEET_DEFAULTS.prefix,
    json: values.json === true,
    idle: parseNumber('idle', str('idle'), 0),
    workers: parseNumber('workers', str('workers'), 0),
  };
  const username = str('username');
  const password = str('password');
  if (username !== undefined) opts.username = username;
  if (password !== undefined) opts.password = password;
  if (seed !== undefined) opts.seed = seed;
  const questions = str('questions');
  if (questions !== undefined) {
    const n = parseNumber('questions', questions, 1);
    if (!Number.isInteger(n) || n < 1) throw new UsageError(`--questions: must be a positive integer, got "${questions}"`);
    opts.questions = n;
  }

  const problem = checkFleetOptions(opts);
  if (problem !== null) throw new UsageError(problem);
  if (!(Number.isInteger(opts.idle) && opts.idle >= 0 && opts.idle <= MAX_IDLE)) {
    throw new UsageError(`--idle: must be an integer from 0 to ${MAX_IDLE}, got ${opts.idle}`);
  }
  // Idle devices and the fast fleet are raw MQTT over TCP (no TLS or WebSocket framing).
  if (opts.idle > 0 && !['mqtt:', 'tcp:'].includes(new URL(opts.url).protocol)) {
    throw new UsageError('--idle: needs an mqtt:// (or tcp://) --url');
  }
  if (!(Number.isInteger(opts.workers) && opts.workers >= 0 && opts.workers <= MAX_WORKERS)) {
    throw new UsageError(`--workers: must be an integer from 0 to ${MAX_WORKERS}, got ${opts.workers}`);
  }
  if (opts.workers > 0) {
    if (!['mqtt:', 'tcp:'].includes(new URL(opts.url).protocol)) throw new UsageError('--workers: needs an mqtt:// (or tcp://) --url');
    if (opts.qos !== 1) throw new UsageError('--workers: the fast fleet sends at QoS 1 only');
    if (opts.questions !== undefined) throw new UsageError('--workers: every request text is distinct; --questions needs --workers 0');
  }
  return opts;
}

async function connectDevice(opts: FleetOptions, id: string, onMessage: (device: string, payload: Buffer) => void): Promise<MqttClient> {
  const connectOpts: IClientOptions = {
    clientId: id,
    clean: true,
    connectTimeout: 10_000,
    // Reconnect during the run like a real device would; replies missed meanwhile count as lost.
    reconnectPeriod: 1_000,
  };
  if (opts.username !== undefined) connectOpts.username = opts.username;
  if (opts.password !== undefined) connectOpts.password = opts.password;
  // No retries for the first connect: a wrong URL or credentials should fail the run at once.
  const client = await mqtt.connectAsync(opts.url, connectOpts, false);
  disableNagle(client);
  client.on('connect', () => disableNagle(client));
  try {
    client.on('message', (_topic, payload) => onMessage(id, payload));
    // Replies published before the subscription exists would be dropped, so subscribe first.
    const grants = await client.subscribeAsync(topics.result(id), { qos: 1 });
    const refused = grants.find((g) => g.qos === 128);
    if (refused !== undefined) throw new Error(`subscription to ${refused.topic} refused by the broker`);
  } catch (err) {
    client.end(true);
    throw err;
  }
  client.on('error', () => {
    // Reconnects report errors here; without a listener they would crash the process.
  });
  return client;
}

async function endClient(client: MqttClient): Promise<void> {
  // A polite end waits for outstanding acks, which a dead broker never sends; then force it.
  let timer: NodeJS.Timeout | undefined;
  const timedOut = await Promise.race([
    client.endAsync(false).then(() => false),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), END_GRACE_MS);
    }),
  ]);
  clearTimeout(timer);
  if (timedOut) await client.endAsync(true);
}

/**
 * Nagle's algorithm holds small writes until the previous one is acked, which with delayed
 * ACKs adds ~40 ms to a request/reply exchange: an artefact of the simulator, not of the bridge.
 */
function disableNagle(client: MqttClient): void {
  const stream = client.stream as { setNoDelay?: (noDelay: boolean) => unknown } | undefined;
  if (typeof stream?.setNoDelay === 'function') stream.setNoDelay(true);
}

function requestPayload(deviceId: string, seq: number, question: number | undefined): InferRequest {
  // Distinct text per request unless asked otherwise, so the bridge's cache does not flatter the numbers.
  const content =
    question === undefined
      ? `device ${deviceId} request ${seq}: is part ${seq} within tolerance?`
      : `question ${question}: is the part within tolerance?`;
  return { id: `${deviceId}-${seq}`, messages: [{ role: 'user', content }], max_tokens: 32 };
}

/** The reply's outcome, or null when it is not a reply (unparseable, or no id). */
function readReply(payload: Buffer): { id: string; outcome: { ok: true } | { ok: false; code: string } } | null {
  let data: unknown;
  try {
    data = JSON.parse(payload.toString('utf8'));
  } catch {
    return null;
  }
  const parsed = ReplySchema.safeParse(data);
  if (parsed.success) {
    const reply = parsed.data;
    if (reply.id === null) return null;
    return { id: reply.id, outcome: reply.ok ? { ok: true } : { ok: false, code: reply.error.code } };
  }
  // A reply that names one of our ids but breaks the schema still answers that request.
  if (typeof data === 'object' && data !== null && typeof (data as { id?: unknown }).id === 'string') {
    return { id: (data as { id: string }).id, outcome: { ok: false, code: 'malformed_reply' } };
  }
  return null;
}

export async function runFleet(opts: FleetOptions): Promise<FleetReport> {
  const problem = checkFleetOptions(opts);
  if (problem !== null) throw new RangeError(problem);
  const replyTimeoutMs = opts.replyTimeoutMs ?? FLEET_DEFAULTS.replyTimeoutMs;
  const concurrency = opts.connectConcurrency ?? FLEET_DEFAULTS.connectConcurrency;
  const prefix = opts.prefix ?? FLEET_DEFAULTS.prefix;
  const progress = opts.onProgress ?? ((): void => {});
  const random = opts.seed === undefined ? Math.random : seededRandom(opts.seed);

  const tally = emptyTally();
  const devices = new Map<string, Device>();
  let outstanding = 0;
  let lastReplyAt = 0;
  let wakeWaiter: (() => void) | null = null;

  const settle = (device: Device, id: string): Pending | null => {
    const p = device.pending.get(id);
    if (p === undefined) return null;
    device.pending.delete(id);
    outstanding -= 1;
    if (outstanding === 0) wakeWaiter?.();
    return p;
  };

  const onMessage = (deviceId: string, payload: Buffer): void => {
    const now = performance.now();
    const device = devices.get(deviceId);
    const reply = readReply(payload);
    if (device === undefined || reply === null) return;
    // Unknown ids and duplicates (already settled) find nothing pending and are ignored.
    const p = settle(device, reply.id);
    if (p === null) return;
    const latency = now - p.sentAt;
    // Late replies are still "no reply within the timeout", the contract's definition of lost.
    if (latency > replyTimeoutMs) recordLost(tally, p.priority);
    else {
      recordReply(tally, p.priority, reply.outcome, latency);
      lastReplyAt = now;
    }
  };

  const ids = deviceIds(prefix, opts.devices);
  progress(`connecting ${ids.length} devices to ${redactUrl(opts.url)}`);
  let next = 0;
  let connectError: unknown = null;
  const worker = async (): Promise<void> => {
    while (connectError === null && next < ids.length) {
      const id = ids[next++] as string;
      try {
        const client = await connectDevice(opts, id, onMessage);
        devices.set(id, { id, client, pending: new Map(), seq: 0 });
      } catch (err) {
        connectError ??= new Error(`device ${id}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, ids.length) }, worker));

  try {
    if (connectError !== null) throw connectError;
    const fleet = ids.map((id) => devices.get(id) as Device);
    const total = Math.max(1, Math.round(opts.rate * opts.durationS));
    const intervalMs = 1000 / opts.rate;
    progress(`sending ${total} requests at ${opts.rate}/s for ${opts.durationS} s`);

    const send = (k: number): void => {
      const device = fleet[k % fleet.length] as Device;
      device.seq += 1;
      const question = opts.questions === undefined ? undefined : Math.floor(random() * opts.questions);
      const request = requestPayload(device.id, device.seq, question);
      const priority = pickPriority(opts.mix, random);
      const entry: Pending = { priority, sentAt: performance.now() };
      device.pending.set(request.id, entry);
      outstanding += 1;
      recordSent(tally, priority);
      device.client.publish(topics.infer(device.id, priority), JSON.stringify(request), { qos: opts.qos }, (err) => {
        if (err === undefined || err === null) return;
        // Only count it if no reply beat the failure report.
        if (settle(device, request.id) !== null) recordFailure(tally, priority, 'publish_failed');
      });
    };

    // Send k is due at start + k·interval: a late timer catches up instead of shifting the schedule.
    const start = performance.now();
    let k = 0;
    while (k < total) {
      const now = performance.now();
      while (k < total && start + k * intervalMs <= now) send(k++);
      if (k < total) await sleep(start + k * intervalMs - performance.now());
    }
    const sendEnd = performance.now();

    if (outstanding > 0) {
      progress(`sent ${total}; waiting up to ${replyTimeoutMs} ms for ${outstanding} replies`);
      const waitMs = sendEnd + replyTimeoutMs - performance.now();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(0, waitMs));
        wakeWaiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wakeWaiter = null;
    }
    for (const device of fleet) {
      for (const p of device.pending.values()) recordLost(tally, p.priority);
      device.pending.clear();
    }
    outstanding = 0;

    const durationS = (Math.max(sendEnd, lastReplyAt) - start) / 1000;
    const config: ReportConfig = {
      url: redactUrl(opts.url),
      devices: opts.devices,
      rate: opts.rate,
      durationS: opts.durationS,
      mix: opts.mix,
      qos: opts.qos,
      replyTimeoutMs,
      prefix,
    };
    return buildReport(tally, durationS, config);
  } finally {
    progress(`closing ${devices.size} connections`);
    await Promise.all([...devices.values()].map((d) => endClient(d.client)));
  }
}
