// device-sim's command line: each option read into the fleet's arguments (with its default),
// then the option checks; a bad value is a UsageError naming the option.
import { parseArgs } from 'node:util';
import { TEMPLATE_NAME_PATTERN, UsageError } from '../contract/index.js';
import { checkLogins, ID_PLACEHOLDER, readPasswordFile } from './credentials.js';
import { frameSource } from './frames.js';
import { checkFleetOptions, deviceIds, FLEET_DEFAULTS, type FleetOptions } from './fleet-options.js';
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

/** The options that take a value (and the flags --json and --stream). */
const STRING_OPTIONS = [
  'mix',
  'qos',
  'seed',
  'url',
  'devices',
  'rate',
  'duration',
  'reply-timeout',
  'connect-concurrency',
  'prefix',
  'idle',
  'workers',
  'username',
  'password',
  'password-file',
  'questions',
  'ttl-ms',
  'images',
  'template',
] as const;

function parseNumber(option: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--${option}: not a number: "${raw}"`);
  return n;
}

function readMix(raw: string | undefined): Mix {
  try {
    return parseMix(raw ?? FLEET_DEFAULTS.mix);
  } catch (err) {
    throw new UsageError(`--mix: ${err instanceof Error ? err.message : String(err)}`);
  }
}

function readSeed(raw: string | undefined): Pick<FleetArgs, 'seed'> {
  if (raw === undefined) return {};
  const seed = parseNumber('seed', raw, 0);
  if (!Number.isInteger(seed)) throw new UsageError(`--seed: must be an integer, got "${raw}"`);
  return { seed };
}

/** --images DIR|generated with --template NAME: the image mode. */
function readImages(images: string | undefined, template: string | undefined): Pick<FleetArgs, 'images'> {
  if (images === undefined && template === undefined) return {};
  if (images === undefined) throw new UsageError('--template: only with --images (a template request without an image is not simulated)');
  if (template === undefined || !TEMPLATE_NAME_PATTERN.test(template)) {
    throw new UsageError('--images: needs --template NAME, a CONFIG_FILE template (1 to 64 characters of A-Za-z0-9_.-)');
  }
  return { images: { frame: frameSource(images), template } };
}

function readQuestions(raw: string | undefined): Pick<FleetArgs, 'questions'> {
  if (raw === undefined) return {};
  const n = parseNumber('questions', raw, 1);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--questions: must be a positive integer, got "${raw}"`);
  return { questions: n };
}

/**
 * Parses device-sim's command line (without the node and script entries), applies the
 * defaults and validates. Throws UsageError with a one-line message naming the option.
 */
export function parseFleetArgs(argv: readonly string[]): FleetArgs {
  const values = readCommandLine(argv);
  const raw = (flag: string): string | undefined => (typeof values[flag] === 'string' ? (values[flag] as string) : undefined);
  const num = (flag: string, fallback: number): number => parseNumber(flag, raw(flag), fallback);
  // Read in this order, so with several bad options the one named is always the same.
  const opts: FleetArgs = {
    json: values.json === true,
    mix: readMix(raw('mix')),
    qos: num('qos', FLEET_DEFAULTS.qos) as FleetOptions['qos'],
    ...readSeed(raw('seed')),
    url: raw('url') ?? FLEET_DEFAULTS.url,
    devices: num('devices', FLEET_DEFAULTS.devices),
    rate: num('rate', FLEET_DEFAULTS.rate),
    durationS: num('duration', FLEET_DEFAULTS.durationS),
    // Seconds on the command line, milliseconds in the options.
    replyTimeoutMs: num('reply-timeout', FLEET_DEFAULTS.replyTimeoutMs / 1000) * 1000,
    connectConcurrency: num('connect-concurrency', FLEET_DEFAULTS.connectConcurrency),
    prefix: raw('prefix') ?? FLEET_DEFAULTS.prefix,
    idle: num('idle', 0),
    workers: num('workers', 0),
    ...readUsername(raw('username'), values['username-from-id'] === true),
    ...(raw('password') === undefined ? {} : { password: raw('password') as string }),
    ...(raw('password-file') === undefined ? {} : { passwordFile: readPasswordFile(raw('password-file') as string) }),
    ...(values.mqtt5 === true ? { mqtt5: true } : {}),
    ...readQuestions(raw('questions')),
    ...(raw('ttl-ms') === undefined ? {} : { ttlMs: num('ttl-ms', 0) }),
    ...readImages(raw('images'), raw('template')),
    ...(values.stream === true ? { stream: true } : {}),
    ...(values.client === true ? { client: true } : {}),
  };
  const problem = checkFleetOptions(opts) ?? checkRunMode(opts) ?? checkLogins(opts, everyDevice(opts));
  if (problem !== null) throw new UsageError(problem);
  return opts;
}

/** --username NAME (which may hold {id}), or --username-from-id: each device's id is its user name. */
function readUsername(raw: string | undefined, fromId: boolean): Pick<FleetArgs, 'username'> {
  if (!fromId) return raw === undefined ? {} : { username: raw };
  if (raw !== undefined) throw new UsageError(`--username-from-id: leave out --username (or write ${ID_PLACEHOLDER} in --username)`);
  return { username: ID_PLACEHOLDER };
}

/** Every client id the run connects: the fleet's devices and the idle ones. */
function everyDevice(opts: FleetArgs): string[] {
  const prefix = opts.prefix ?? FLEET_DEFAULTS.prefix;
  return [...deviceIds(prefix, opts.devices), ...Array.from({ length: opts.idle }, (_, i) => `${prefix}-idle-${i + 1}`)];
}

function readCommandLine(argv: readonly string[]): Record<string, string | boolean | undefined> {
  try {
    return parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        ...Object.fromEntries(STRING_OPTIONS.map((flag) => [flag, { type: 'string' as const }])),
        json: { type: 'boolean' },
        stream: { type: 'boolean' },
        client: { type: 'boolean' },
        mqtt5: { type: 'boolean' },
        'username-from-id': { type: 'boolean' },
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
  if (opts.images !== undefined) return '--workers: the fast fleet sends chat requests; --images needs --workers 0';
  if (opts.stream === true) return '--workers: the fast fleet reads no streams; --stream needs --workers 0';
  if (opts.mqtt5 === true) return '--workers: the fast fleet speaks MQTT 3.1.1; --mqtt5 needs --workers 0';
  if (opts.client === true) return '--workers: the fast fleet writes raw MQTT frames; --client needs --workers 0';
  return null;
}
