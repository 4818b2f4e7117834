// Every environment variable the bridge reads, once: its name, its check and its default.
// The Config type is derived from this schema (config.ts), so a variable is written here only.
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { PRIORITIES, type Priority } from '../../contract/index.js';

const int = (min: number) => z.coerce.number({ error: 'must be a number' }).int('must be an integer').min(min, `must be at least ${min}`);
const port = z.coerce.number({ error: 'must be a number' }).int('must be an integer').min(0).max(65535, 'must be a port number (0-65535)');
const bool = z.enum(['true', 'false', '1', '0', 'yes', 'no'], { error: 'must be true or false' }).transform((v) => v === 'true' || v === '1' || v === 'yes');
const url = (protocols: string[]) =>
  z.string().refine(
    (v) => {
      try {
        return protocols.includes(new URL(v).protocol);
      } catch {
        return false;
      }
    },
    `must be a URL (${protocols.join(' or ')})`,
  );
const hostPortList = z.string().transform((value, ctx) => {
  const list: Array<{ host: string; port: number }> = [];
  for (const item of value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const match = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$/.exec(item);
    const portNumber = Number(match?.[2]);
    if (!match || portNumber < 1 || portNumber > 65535) {
      ctx.addIssue({ code: 'custom', message: `"${item}" is not host:port` });
      return z.NEVER;
    }
    list.push({ host: (match[1] as string).replace(/^\[|\]$/g, ''), port: portNumber });
  }
  if (list.length === 0) {
    ctx.addIssue({ code: 'custom', message: 'must list at least one host:port' });
    return z.NEVER;
  }
  return list;
});
const keyList = z.string().transform((v) =>
  v
    .split(',')
    .map((k) => k.trim())
    .filter((k) => k.length > 0),
);
const readableFile = z.string().refine((path) => {
  try {
    readFileSync(path);
    return true;
  } catch {
    return false;
  }
}, 'file cannot be read');
/** A Sparkplug id (group, edge node, host): the spec reserves + # / (topic levels and wildcards). */
const sparkplugId = z
  .string()
  .regex(/^[^+#/\u0000-\u001f\u007f]{1,64}$/, 'must be 1 to 64 characters, none of + # / (Sparkplug reserves them) nor control characters');
const name64 = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 characters of A-Za-z0-9_-');

export const DEFAULT_PRIORITY_OFFSETS_MS: Readonly<Record<Priority, number>> = { critical: 0, high: 2000, normal: 5000, low: 15000 };

const priorityOffsets = z.string().transform((value, ctx) => {
  const offsets: Record<Priority, number> = { ...DEFAULT_PRIORITY_OFFSETS_MS };
  for (const pair of value
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const [name, ms] = pair.split('=').map((s) => s.trim());
    const n = Number(ms);
    if (!name || !(PRIORITIES as readonly string[]).includes(name)) {
      ctx.addIssue({ code: 'custom', message: `unknown priority "${name ?? ''}" (expected ${PRIORITIES.join(', ')})` });
      return z.NEVER;
    }
    if (ms === undefined || ms === '' || !Number.isInteger(n) || n < 0) {
      ctx.addIssue({ code: 'custom', message: `offset for ${name} must be a non-negative integer of ms` });
      return z.NEVER;
    }
    offsets[name as Priority] = n;
  }
  return offsets;
});

/**
 * Variable name → typed value. Each becomes the Config field of the same name in camelCase
 * (MQTT_TLS_PORT → mqttTlsPort). Variables marked "not in the contract's table" are tuning
 * knobs an operator rarely needs.
 */
export const EnvSchema = z.object({
  MQTT_HOST: z.string().min(1).default('127.0.0.1'),
  MQTT_PORT: port.default(1883),
  MQTT_TLS_PORT: port.optional(),
  TLS_CERT_FILE: readableFile.optional(),
  TLS_KEY_FILE: readableFile.optional(),
  TLS_CA_FILE: readableFile.optional(),
  MQTT_WS_PORT: port.optional(),
  /** Browser Origins the WebSocket listener accepts (comma-separated); a client that sends no Origin is not a browser. */
  MQTT_WS_ALLOWED_ORIGINS: keyList.default(() => []),
  /** The plant's broker; set, the bridge starts no MQTT listener and joins it as a client. */
  BROKER_URL: url(['mqtt:', 'mqtts:', 'ws:', 'wss:']).optional(),
  BROKER_USERNAME: z.string().min(1).optional(),
  BROKER_PASSWORD: z.string().min(1).optional(),
  BROKER_CA_FILE: readableFile.optional(),
  BROKER_CERT_FILE: readableFile.optional(),
  BROKER_KEY_FILE: readableFile.optional(),
  BROKER_SHARE_GROUP: name64.default('edge-ai-bridge'),
  BROKER_SESSION_EXPIRY_S: int(0).default(300),
  /** Connections to the plant's broker per instance, each a member of the share group. */
  BROKER_CONNECTIONS: int(1).max(64, 'must be at most 64').default(4),
  /** With REDIS_URL: an instance whose liveness lease went unrenewed this long is taken for dead and its broker sessions adopted; 0 = off. */
  BROKER_ADOPT_AFTER_MS: int(0)
    .refine((ms) => ms === 0 || ms >= 1000, 'must be 0 (off) or at least 1000')
    .default(5000),
  /** Names the status topics and, with BROKER_URL, the client id; generated when unset. */
  INSTANCE_ID: name64.optional(),
  /** The longest MQTT 5 session expiry the embedded broker grants. */
  MAX_SESSION_EXPIRY_S: int(1).default(86_400),
  /** Embedded broker: messages kept for one offline persistent session; over it the oldest are dropped. */
  MAX_OFFLINE_MESSAGES: int(1).default(1000),
  /** Embedded broker: how long a message waits for an offline persistent session. */
  OFFLINE_MESSAGE_TTL_S: int(1).default(86_400),
  /** Embedded broker: persistent sessions one device id may hold (its client ids `id` and `id.*`). */
  MAX_SESSIONS_PER_DEVICE: int(1).default(8),
  /** Longest topic or topic filter, in bytes, in a PUBLISH, SUBSCRIBE or Will. */
  MAX_TOPIC_LENGTH: int(16).max(65535).default(1024),
  /** Set, the bridge is a Sparkplug B 3.0 Edge Node of this group (docs/sparkplug.md). */
  SPARKPLUG_GROUP_ID: sparkplugId.optional(),
  /** Unset: REDIS_PREFIX with REDIS_URL (one node per fleet), else INSTANCE_ID, else `edge-ai-bridge`. */
  SPARKPLUG_EDGE_NODE_ID: sparkplugId.optional(),
  /** A primary host application whose STATE the Edge Node waits for before its births. */
  SPARKPLUG_PRIMARY_HOST_ID: sparkplugId.optional(),
  /** Plant's broker: a device with no answer for this long gets its DDEATH. */
  SPARKPLUG_DEVICE_IDLE_S: int(1).default(600),
  HTTP_HOST: z.string().min(1).default('127.0.0.1'),
  HTTP_PORT: port.default(9464),
  ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  REDIS_URL: url(['redis:', 'rediss:']).optional(),
  REDIS_TIMEOUT_MS: int(100).default(2000),
  REDIS_SENTINELS: hostPortList.optional(),
  REDIS_SENTINEL_NAME: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1 to 64 characters of A-Za-z0-9_.-')
    .default('mymaster'),
  REDIS_WAIT_REPLICAS: int(0).default(0),
  /** Not in the contract's table: names a deployment's keys, so several can share one Redis. */
  REDIS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'must be 1 to 64 characters of A-Za-z0-9_.:-')
    .default('edge-ai-bridge'),
  UPSTREAM_URL: url(['http:', 'https:']).optional(),
  UPSTREAM_API_KEYS: keyList.default(() => []),
  UPSTREAM_MODEL: z.string().min(1).default('gpt-4o-mini'),
  FALLBACK_URL: url(['http:', 'https:']).optional(),
  FALLBACK_API_KEYS: keyList.optional(),
  FALLBACK_MODEL: z.string().min(1).optional(),
  BREAKER_COOLDOWN_MS: int(1).default(10_000),
  RATE_LIMIT_RPM: int(1).default(600),
  RATE_LIMIT_TPM: int(1).optional(),
  DEVICE_RATE_LIMIT_RPM: int(1).default(120),
  MAX_CONCURRENCY: int(1).default(32),
  /** Not in the contract's table: fair share among the devices of one priority class (docs/fair-share.md). */
  FAIR_SHARE: bool.default(true),
  PRIORITY_OFFSETS_MS: priorityOffsets.default(() => ({ ...DEFAULT_PRIORITY_OFFSETS_MS })),
  QUEUE_MAX: int(1).default(10_000),
  /** The stored size of every queued request together; over it: queue_full. */
  QUEUE_MAX_BYTES: int(1024).default(268_435_456),
  /** The largest max_tokens (or max_completion_tokens) a request may ask for; CONFIG_FILE models may set their own. */
  MAX_TOKENS_CAP: int(1).default(16_384),
  DLQ_MAX: int(1).default(10_000),
  DLQ_MAX_BYTES: int(1024).default(67_108_864),
  DLQ_TTL_S: int(1).default(604_800),
  /** Device-template pairs whose last good answer the SCADA outputs keep; the least recently answered go first. */
  SCADA_MAX_TAGS: int(1).default(10_000),
  /** How long a last good answer not renewed is kept. */
  SCADA_TAG_TTL_S: int(1).default(604_800),
  MAX_ATTEMPTS: int(1).default(3),
  /** Times a model is asked again when its answer breaks the template's output (or the request's json_schema). */
  OUTPUT_RETRIES: int(0).max(5, 'must be at most 5').default(1),
  UPSTREAM_TIMEOUT_MS: int(1).default(30_000),
  MAX_RATE_LIMITED_RETRIES: int(0).default(10),
  MAX_PAYLOAD_BYTES: int(1).default(262_144),
  IMAGE_MAX_BYTES: int(1).default(2_097_152),
  STREAM_FLUSH_MS: int(0).default(100),
  STREAM_FLUSH_BYTES: int(64).default(512),
  STREAM_QOS: z
    .enum(['0', '1'], { error: 'must be 0 or 1' })
    .default('0')
    .transform((v): 0 | 1 => (v === '1' ? 1 : 0)),
  IDEMPOTENCY_TTL_S: int(1).default(86_400),
  CACHE_TTL_S: int(0).default(300),
  SHUTDOWN_GRACE_MS: int(0).default(10_000),
  CONFIG_FILE: readableFile.optional(),
  AUTH_FILE: readableFile.optional(),
  /** Unset: true while the MQTT listener is loopback-bound, false otherwise (config.ts). */
  ALLOW_ANONYMOUS: bool.optional(),
  MAX_CONNECTIONS: int(1).default(50_000),
  CONNECT_TIMEOUT_MS: int(1).default(10_000),
  KEEPALIVE_LIMIT_S: int(1).max(65535).default(600),
  DRAIN_TIMEOUT_MS: int(1).default(2000),
  MAX_CLIENT_BACKLOG_BYTES: int(1).default(4_194_304),
  MAX_INFLIGHT_QOS2: int(1).default(100),
  MAX_SUBSCRIPTIONS: int(1).default(100),
  /** Not in the contract's table: event-loop delay over which intake sheds load; 0 = guard off. */
  OVERLOAD_DELAY_MS: int(0).default(100),
  /** Not in the contract's table: admissions waiting for the store before new requests are shed. */
  MAX_PENDING_ADMISSIONS: int(1).default(2000),
  /** Not in the contract's table: queue wait over which intake sheds load; 0 (default) = guard off. */
  OVERLOAD_QUEUE_WAIT_MS: int(0).default(0),
  /** Not in the contract's table: V8's old-generation growing factor, percent; 0 = V8's own (main.ts). */
  HEAP_GROWING_PERCENT: int(0).max(1000, 'must be at most 1000').default(50),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
      error: 'must be one of fatal, error, warn, info, debug, trace, silent',
    })
    .default('info'),
});

export type Variable = keyof typeof EnvSchema.shape;
export type Env = z.infer<typeof EnvSchema>;

/** Every variable the bridge reads. */
export const VARIABLES = Object.keys(EnvSchema.shape) as Variable[];

/** Variables whose values are secrets: never printed (`edge-ai-bridge config` shows them redacted). */
export const SECRET_VARIABLES: readonly Variable[] = ['ADMIN_TOKEN', 'BROKER_PASSWORD', 'UPSTREAM_API_KEYS', 'FALLBACK_API_KEYS'];

type CamelCase<S extends string> = S extends `${infer Head}_${infer Tail}` ? `${Lowercase<Head>}${Capitalize<CamelCase<Tail>>}` : Lowercase<S>;

/** The variables as Config fields: every field present, undefined where an optional variable is unset. */
export type EnvFields = { -readonly [K in Variable as CamelCase<K>]-?: Env[K] };

export function camelCase(variable: string): string {
  return variable.toLowerCase().replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}
