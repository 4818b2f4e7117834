// The device fleet's options, their defaults and checks, and the naming helpers (device
// ids, a URL fit for reports) the run and the command line share.
import { DEVICE_ID_PATTERN, PRIORITIES } from '../contract/index.js';
import type { LoginOptions } from './credentials.js';
import type { LiveCounts } from './progress.js';
import type { Mix } from './stats.js';

export interface FleetOptions extends LoginOptions {
  /** mqtt://, mqtts://, ws:// or wss:// broker URL. */
  url: string;
  devices: number;
  /** Requests per second for the whole fleet. */
  rate: number;
  durationS: number;
  mix: Mix;
  qos: 0 | 1 | 2;
  /** Devices speak MQTT 5, so a refused publish shows its PUBACK reason; 3.1.1 by default. */
  mqtt5?: boolean;
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
  /**
   * Every request carries this `ttl_ms`, and the report counts, per priority, the replies that
   * came more than 100 ms after publish + ttl_ms (late) and the `expired` ones; unset = none.
   */
  ttlMs?: number;
  /**
   * Image mode: each request is a raw camera frame from this source on
   * devices/{id}/image/{priority}/{template}/{requestId}, asking `template`; unset = chat requests.
   */
  images?: { frame: (seq: number) => Buffer; template: string };
  /**
   * Every request carries `"stream": true`, each device also subscribes to its
   * devices/{id}/stream, and the report adds per priority the time from publish to the
   * request's first chunk; unset = no streaming.
   */
  stream?: boolean;
  /**
   * Each device is device code written with edge-ai-bridge/client (its MQTT 5 response topic,
   * its own reply matching and deadline; retries off, so a lost reply still counts as lost);
   * unset = raw mqtt.js devices.
   */
  client?: boolean;
  /** Progress lines (connecting, sending, waiting); the CLI sends them to stderr. */
  onProgress?: (line: string) => void;
  /** Called once sending starts, with a reader of the live counts (the CLI's progress line). */
  onLive?: (read: () => LiveCounts) => void;
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
// Request ids are `${deviceId}-${seq}` and must stay within the contract's 64 characters.
const MAX_PREFIX_LENGTH = 32;

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
  if (opts.password !== undefined && opts.username === undefined) return '--password: needs --username (or --username-from-id) too';
  if (opts.passwordFile !== undefined && opts.username === undefined) return '--password-file: needs --username-from-id (or --username)';
  if (opts.passwordFile !== undefined && opts.password !== undefined) return '--password-file: leave out --password (the file gives it)';
  if (opts.stream === true && opts.images !== undefined) return '--stream: a raw image is answered on the result topic only; leave out --images';
  if (opts.ttlMs !== undefined && !(Number.isInteger(opts.ttlMs) && opts.ttlMs >= 1)) {
    return `--ttl-ms: must be a positive integer of milliseconds, got ${opts.ttlMs}`;
  }
  return null;
}
