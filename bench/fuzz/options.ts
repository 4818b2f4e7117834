// The fuzzer's options (`npm run fuzz -- --help`) and the bounds it starts the bridge with:
// small, so that a few minutes of hostile input reach every one of them.
import { parseArgs } from 'node:util';
import { KINDS, type Kind } from './inputs/actions.js';

export interface FuzzOptions {
  /** Baseline plus attack, in minutes (fractions allowed); the drain comes on top. */
  minutes: number;
  /** Seeds every generated input: the same seed replays the same inputs in the same order per attacker. */
  seed: number;
  attackers: number;
  /** Inputs per second per attacker. */
  rate: number;
  /** A Redis to use (a unique key prefix is made and deleted); unset: a private redis-server. */
  redisUrl: string | undefined;
  /** The bridge's TTLs (idempotency, cache, offline messages, sessions, dead letters), in seconds. */
  ttlS: number;
  /** Seconds from the attack's end to the last Redis sample; default 2 × ttlS + 10. */
  drainS: number | undefined;
  json: boolean;
  /** The input kinds to generate (default: all). */
  kinds: Kind[];
}

export const USAGE = `usage: npm run fuzz -- [--minutes 2] [--seed N] [--attackers 4] [--rate 5]
  [--redis redis://host:port] [--ttl 20] [--drain S] [--kinds cbor,raw,…] [--json]
  --minutes   baseline + attack (the baseline is a fifth, 10 to 60 s); the drain follows
  --seed      replays the same inputs (printed at the start and on failure)
  --attackers anonymous attacker devices, each sending --rate inputs a second
  --redis     default: a private redis-server on a free port (REDIS_URL is read too)
  --ttl       the bridge's idempotency, cache, offline-message, session and dead-letter TTLs
  --drain     seconds from the attack's end to the last Redis sample (default 2 x ttl + 10)
  --kinds     only these input kinds (default all: ${KINDS.join(', ')})
  --json      the report as JSON on stdout (progress stays on stderr)`;

export function parseFuzzArgs(argv: string[]): FuzzOptions {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      minutes: { type: 'string', default: '2' },
      seed: { type: 'string' },
      attackers: { type: 'string', default: '4' },
      rate: { type: 'string', default: '5' },
      redis: { type: 'string' },
      ttl: { type: 'string', default: '20' },
      drain: { type: 'string' },
      json: { type: 'boolean', default: false },
      kinds: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) throw new UsageHelp();
  const num = (name: string, raw: string, min: number, max: number): number => {
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n) || n < min || n > max) throw new Error(`--${name}: expected a number from ${min} to ${max}, got "${raw}"`);
    return n;
  };
  return {
    minutes: num('minutes', values.minutes, 0.2, 24 * 60),
    seed: values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Math.floor(num('seed', values.seed, 0, 2 ** 31 - 1)),
    attackers: Math.floor(num('attackers', values.attackers, 1, 64)),
    rate: num('rate', values.rate, 0.1, 1000),
    redisUrl: values.redis ?? process.env.REDIS_URL,
    ttlS: Math.floor(num('ttl', values.ttl, 2, 3600)),
    drainS: values.drain === undefined ? undefined : num('drain', values.drain, 0, 24 * 3600),
    json: values.json,
    kinds: kindList(values.kinds),
  };
}

export class UsageHelp extends Error {}

function kindList(raw: string | undefined): Kind[] {
  if (raw === undefined) return [...KINDS];
  const kinds = raw
    .split(',')
    .map((k) => k.trim())
    .filter(Boolean);
  const unknown = kinds.filter((k) => !(KINDS as readonly string[]).includes(k));
  if (unknown.length > 0 || kinds.length === 0) throw new Error(`--kinds: unknown ${unknown.join(', ') || '(none given)'}; known: ${KINDS.join(', ')}`);
  return kinds as Kind[];
}

/** Baseline, attack and drain lengths in ms. */
export function phases(options: FuzzOptions): { baselineMs: number; attackMs: number; drainMs: number } {
  const totalMs = options.minutes * 60_000;
  const baselineMs = Math.round(Math.min(60_000, Math.max(10_000, totalMs / 5)));
  return { baselineMs, attackMs: Math.max(5_000, totalMs - baselineMs), drainMs: (options.drainS ?? 2 * options.ttlS + 10) * 1000 };
}

/** The bounds the bridge runs with, as its environment: small, so the attack reaches them. */
export function boundedEnv(ttlS: number): Record<string, string> {
  const ttl = String(ttlS);
  return {
    QUEUE_MAX: '200',
    QUEUE_MAX_BYTES: String(4 * 2 ** 20),
    DLQ_MAX: '50',
    DLQ_MAX_BYTES: String(256 * 1024),
    DLQ_TTL_S: ttl,
    MAX_OFFLINE_MESSAGES: '20',
    OFFLINE_MESSAGE_TTL_S: ttl,
    MAX_SESSIONS_PER_DEVICE: '2',
    MAX_SESSION_EXPIRY_S: ttl,
    MAX_TOPIC_LENGTH: '256',
    MAX_TOKENS_CAP: '1024',
    IDEMPOTENCY_TTL_S: ttl,
    CACHE_TTL_S: ttl,
    IMAGE_MAX_BYTES: String(256 * 1024),
    MAX_SUBSCRIPTIONS: '20',
    MAX_CLIENT_BACKLOG_BYTES: String(256 * 1024),
    // The fleet's upstream limits sit well above the offered load: the fuzzer looks for harm
    // done by what a device sends, not for capacity (a TPM budget is set so estimates count).
    RATE_LIMIT_RPM: '6000',
    RATE_LIMIT_TPM: '2000000',
    UPSTREAM_TIMEOUT_MS: '5000',
  };
}
