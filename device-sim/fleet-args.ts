// device-sim's command line: one table of options, each read into the fleet's arguments
// (with its default), then the option checks; a bad value is a UsageError naming the option.
import { parseArgs } from 'node:util';
import { UsageError } from '../contract/index.js';
import { checkFleetOptions, FLEET_DEFAULTS, type FleetOptions } from './fleet-options.js';
import { parseMix, type Mix } from './stats.js';

export interface FleetArgs extends FleetOptions {
  /** Print the report as one JSON object instead of the table. */
  json: boolean;
  /** Idle devices (device-sim/idle.ts) to connect before the fleet runs; 0 = none. */
  idle: number;
  /** Worker threads for the fast fleet (device-sim/load.ts); 0 = the mqtt.js fleet in this thread. */
  workers: number;
}

const MAX_WORKERS = 64;
const MAX_IDLE = 1_000_000;

/** Reads one option's raw value (undefined when absent) into the fields it sets. */
type Reader = (raw: string | undefined, flag: string) => Partial<FleetArgs>;

function parseNumber(option: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--${option}: not a number: "${raw}"`);
  return n;
}

const readMix: Reader = (raw) => {
  let mix: Mix;
  try {
    mix = parseMix(raw ?? FLEET_DEFAULTS.mix);
  } catch (err) {
    throw new UsageError(`--mix: ${err instanceof Error ? err.message : String(err)}`);
  }
  return { mix };
};

const readSeed: Reader = (raw, flag) => {
  if (raw === undefined) return {};
  const seed = parseNumber(flag, raw, 0);
  if (!Number.isInteger(seed)) throw new UsageError(`--seed: must be an integer, got "${raw}"`);
  return { seed };
};

const readQuestions: Reader = (raw, flag) => {
  if (raw === undefined) return {};
  const n = parseNumber(flag, raw, 1);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--questions: must be a positive integer, got "${raw}"`);
  return { questions: n };
};

// Read in this order, so with several bad options the one named is always the same.
const OPTIONS: ReadonlyArray<readonly [flag: string, read: Reader]> = [
  ['mix', readMix],
  ['qos', (raw, flag) => ({ qos: parseNumber(flag, raw, FLEET_DEFAULTS.qos) as FleetOptions['qos'] })],
  ['seed', readSeed],
  ['url', (raw) => ({ url: raw ?? FLEET_DEFAULTS.url })],
  ['devices', (raw, flag) => ({ devices: parseNumber(flag, raw, FLEET_DEFAULTS.devices) })],
  ['rate', (raw, flag) => ({ rate: parseNumber(flag, raw, FLEET_DEFAULTS.rate) })],
  ['duration', (raw, flag) => ({ durationS: parseNumber(flag, raw, FLEET_DEFAULTS.durationS) })],
  // Seconds on the command line, milliseconds in the options.
  ['reply-timeout', (raw, flag) => ({ replyTimeoutMs: parseNumber(flag, raw, FLEET_DEFAULTS.replyTimeoutMs / 1000) * 1000 })],
  ['connect-concurrency', (raw, flag) => ({ connectConcurrency: parseNumber(flag, raw, FLEET_DEFAULTS.connectConcurrency) })],
  ['prefix', (raw) => ({ prefix: raw ?? FLEET_DEFAULTS.prefix })],
  ['idle', (raw, flag) => ({ idle: parseNumber(flag, raw, 0) })],
  ['workers', (raw, flag) => ({ workers: parseNumber(flag, raw, 0) })],
  ['username', (raw) => (raw === undefined ? {} : { username: raw })],
  ['password', (raw) => (raw === undefined ? {} : { password: raw })],
  ['questions', readQuestions],
];

/**
 * Parses device-sim's command line (without the node and script entries), applies the
 * defaults and validates. Throws UsageError with a one-line message naming the option.
 */
export function parseFleetArgs(argv: readonly string[]): FleetArgs {
  const values = readCommandLine(argv);
  const fields = OPTIONS.map(([flag, read]) => {
    const raw = values[flag];
    return read(typeof raw === 'string' ? raw : undefined, flag);
  });
  const opts = Object.assign({ json: values.json === true }, ...fields) as FleetArgs;
  const problem = checkFleetOptions(opts) ?? checkRunMode(opts);
  if (problem !== null) throw new UsageError(problem);
  return opts;
}

function readCommandLine(argv: readonly string[]): Record<string, string | boolean | undefined> {
  try {
    return parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        ...Object.fromEntries(OPTIONS.map(([flag]) => [flag, { type: 'string' as const }])),
        json: { type: 'boolean' },
      },
    }).values;
  } catch (err) {
    // node's messages span several lines; the contract wants one.
    throw new UsageError((err instanceof Error ? err.message : String(err)).replace(/\s*\n\s*/g, ' '));
  }
}

/** The checks on --idle and --workers, which only the command line has; a message, or null. */
function checkRunMode(opts: FleetArgs): string | null {
  // Idle devices and the fast fleet are raw MQTT over TCP (no TLS or WebSocket framing).
  const rawTcp = ['mqtt:', 'tcp:'].includes(new URL(opts.url).protocol);
  if (!(Number.isInteger(opts.idle) && opts.idle >= 0 && opts.idle <= MAX_IDLE)) {
    return `--idle: must be an integer from 0 to ${MAX_IDLE}, got ${opts.idle}`;
  }
  if (opts.idle > 0 && !rawTcp) return '--idle: needs an mqtt:// (or tcp://) --url';
  if (!(Number.isInteger(opts.workers) && opts.workers >= 0 && opts.workers <= MAX_WORKERS)) {
    return `--workers: must be an integer from 0 to ${MAX_WORKERS}, got ${opts.workers}`;
  }
  if (opts.workers === 0) return null;
  if (!rawTcp) return '--workers: needs an mqtt:// (or tcp://) --url';
  if (opts.qos !== 1) return '--workers: the fast fleet sends at QoS 1 only';
  if (opts.questions !== undefined) return '--workers: every request text is distinct; --questions needs --workers 0';
  return null;
}
