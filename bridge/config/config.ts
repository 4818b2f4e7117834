// Configuration from the environment (CONTRACT.md "Configuration"), validated with zod.
// A bad value stops the start with one line naming the variable: ConfigError carries it.
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ConfigError, PRIORITIES, type Priority } from '../../contract/index.js';

const int = (min: number) => z.coerce.number({ error: 'must be a number' }).int('must be an integer').min(min, `must be at least ${min}`);
const port = z.coerce.number({ error: 'must be a number' }).int('must be an integer').min(0).max(65535, 'must be a port number (0-65535)');
const bool = z.enum(['true', 'false', '1', '0', 'yes', 'no'], { error: 'must be true or false' }).transform((v) => v === 'true' || v === '1' || v === 'yes');
const url = (protocols: string[]) =>
  z.string().refine((v) => {
    try {
      return protocols.includes(new URL(v).protocol);
    } catch {
      return false;
    }
  }, `must be a URL (${protocols.join(' or ')})`);
const keyList = z.string().transform((v) => v.split(',').map((k) => k.trim()).filter((k) => k.length > 0));
const readableFile = z.string().refine((path) => {
  try {
    readFileSync(path);
    return true;
  } catch {
    return false;
  }
}, 'file cannot be read');

export const DEFAULT_PRIORITY_OFFSETS_MS: Record<Priority, number> = { critical: 0, high: 2000, normal: 5000, low: 15000 };

const priorityOffsets = z.string().transform((value, ctx) => {
  const offsets: Record<Priority, number> = { ...DEFAULT_PRIORITY_OFFSETS_MS };
  for (const pair of value.split(',').map((p) => p.trim()).filter(Boolean)) {
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

/** The schema maps each environment variable to its typed value; keys are the variable names. */
const EnvSchema = z.object({
  MQTT_HOST: z.string().min(1).default('127.0.0.1'),
  MQTT_PORT: port.default(1883),
  MQTT_TLS_PORT: port.optional(),
  TLS_CERT_FILE: readableFile.optional(),
  TLS_KEY_FILE: readableFile.optional(),
  TLS_CA_FILE: readableFile.optional(),
  MQTT_WS_PORT: port.optional(),
  BROKER_URL: url(['mqtt:', 'mqtts:', 'ws:', 'wss:']).optional(),
  BROKER_USERNAME: z.string().min(1).optional(),
  BROKER_PASSWORD: z.string().min(1).optional(),
  BROKER_CA_FILE: readableFile.optional(),
  BROKER_CERT_FILE: readableFile.optional(),
  BROKER_KEY_FILE: readableFile.optional(),
  BROKER_SHARE_GROUP: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 characters of A-Za-z0-9_-').default('edge-ai-bridge'),
  BROKER_SESSION_EXPIRY_S: int(0).default(300),
  BROKER_CONNECTIONS: int(1).max(64, 'must be at most 64').default(4),
  INSTANCE_ID: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 characters of A-Za-z0-9_-').optional(),
  MAX_SESSION_EXPIRY_S: int(1).default(86_400),
  HTTP_HOST: z.string().min(1).default('127.0.0.1'),
  HTTP_PORT: port.default(9464),
  ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  REDIS_URL: url(['redis:', 'rediss:']).optional(),
  REDIS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'must be 1 to 64 characters of A-Za-z0-9_.:-')
    .default('edge-ai-bridge'),
  UPSTREAM_URL: url(['http:', 'https:']).optional(),
  UPSTREAM_API_KEYS: keyList.optional(),
  UPSTREAM_MODEL: z.string().min(1).default('gpt-4o-mini'),
  FALLBACK_URL: url(['http:', 'https:']).optional(),
  FALLBACK_API_KEYS: keyList.optional(),
  FALLBACK_MODEL: z.string().min(1).optional(),
  BREAKER_COOLDOWN_MS: int(1).default(10_000),
  RATE_LIMIT_RPM: int(1).default(600),
  RATE_LIMIT_TPM: int(1).optional(),
  DEVICE_RATE_LIMIT_RPM: int(1).default(120),
  MAX_CONCURRENCY: int(1).default(32),
  PRIORITY_OFFSETS_MS: priorityOffsets.default(DEFAULT_PRIORITY_OFFSETS_MS),
  QUEUE_MAX: int(1).default(10_000),
  MAX_ATTEMPTS: int(1).default(3),
  UPSTREAM_TIMEOUT_MS: int(1).default(30_000),
  MAX_RATE_LIMITED_RETRIES: int(0).default(10),
  MAX_PAYLOAD_BYTES: int(1).default(262_144),
  IDEMPOTENCY_TTL_S: int(1).default(86_400),
  CACHE_TTL_S: int(0).default(300),
  SHUTDOWN_GRACE_MS: int(0).default(10_000),
  CONFIG_FILE: readableFile.optional(),
  AUTH_FILE: readableFile.optional(),
  ALLOW_ANONYMOUS: bool.optional(),
  MAX_CONNECTIONS: int(1).default(50_000),
  CONNECT_TIMEOUT_MS: int(1).default(10_000),
  KEEPALIVE_LIMIT_S: int(1).max(65535).default(600),
  DRAIN_TIMEOUT_MS: int(1).default(2000),
  MAX_CLIENT_BACKLOG_BYTES: int(1).default(4_194_304),
  MAX_INFLIGHT_QOS2: int(1).default(100),
  MAX_SUBSCRIPTIONS: int(1).default(100),
  OVERLOAD_DELAY_MS: int(0).default(100),
  MAX_PENDING_ADMISSIONS: int(1).default(2000),
  OVERLOAD_QUEUE_WAIT_MS: int(0).default(0),
  HEAP_GROWING_PERCENT: int(0).max(1000, 'must be at most 1000').default(50),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
      error: 'must be one of fatal, error, warn, info, debug, trace, silent',
    })
    .default('info'),
});

type Env = z.infer<typeof EnvSchema>;

export interface Config {
  mqttHost: string;
  mqttPort: number;
  mqttTlsPort: number | undefined;
  tlsCertFile: string | undefined;
  tlsKeyFile: string | undefined;
  tlsCaFile: string | undefined;
  mqttWsPort: number | undefined;
  /** The plant's broker; set, the bridge starts no MQTT listener and joins it as a client. */
  brokerUrl: string | undefined;
  brokerUsername: string | undefined;
  brokerPassword: string | undefined;
  brokerCaFile: string | undefined;
  brokerCertFile: string | undefined;
  brokerKeyFile: string | undefined;
  brokerShareGroup: string;
  brokerSessionExpiryS: number;
  /** Connections to the plant's broker per instance, each a member of the share group. */
  brokerConnections: number;
  /** Names the status topics and, with BROKER_URL, the client id; generated when unset. */
  instanceId: string | undefined;
  /** The longest MQTT 5 session expiry the embedded broker grants. */
  maxSessionExpiryS: number;
  httpHost: string;
  httpPort: number;
  adminToken: string | undefined;
  redisUrl: string | undefined;
  /** Not in the contract's table: names a deployment's keys, so several can share one Redis. */
  redisPrefix: string;
  upstreamUrl: string | undefined;
  upstreamApiKeys: string[];
  upstreamModel: string;
  fallbackUrl: string | undefined;
  fallbackApiKeys: string[];
  fallbackModel: string | undefined;
  breakerCooldownMs: number;
  rateLimitRpm: number;
  rateLimitTpm: number | undefined;
  deviceRateLimitRpm: number;
  maxConcurrency: number;
  priorityOffsetsMs: Record<Priority, number>;
  queueMax: number;
  maxAttempts: number;
  upstreamTimeoutMs: number;
  maxRateLimitedRetries: number;
  maxPayloadBytes: number;
  idempotencyTtlS: number;
  cacheTtlS: number;
  shutdownGraceMs: number;
  configFile: string | undefined;
  authFile: string | undefined;
  allowAnonymous: boolean;
  maxConnections: number;
  connectTimeoutMs: number;
  keepaliveLimitS: number;
  drainTimeoutMs: number;
  maxClientBacklogBytes: number;
  maxInflightQos2: number;
  maxSubscriptions: number;
  /** Not in the contract's table: event-loop delay over which intake sheds load; 0 = guard off. */
  overloadDelayMs: number;
  /** Not in the contract's table: admissions waiting for the store before new requests are shed. */
  maxPendingAdmissions: number;
  /** Not in the contract's table: queue wait over which intake sheds load; 0 (default) = guard off. */
  overloadQueueWaitMs: number;
  /** Not in the contract's table: V8's old-generation growing factor, percent; 0 = V8's own (main.ts). */
  heapGrowingPercent: number;
  logLevel: Env['LOG_LEVEL'];
}

const SECRET = /TOKEN|KEY|PASSWORD/;
const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;
export const isLoopback = (host: string): boolean => LOOPBACK.test(host);

/** Parses the environment; throws ConfigError naming the first bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable counts as unset, as shells and compose files often leave them.
  const present = Object.fromEntries(
    Object.keys(EnvSchema.shape)
      .map((k) => [k, env[k]?.trim()])
      .filter(([, v]) => v !== undefined && v !== ''),
  );
  const parsed = EnvSchema.safeParse(present);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const variable = String(issue?.path[0] ?? 'environment');
    // Echo the value so the fix is obvious, unless it may be a secret.
    const shown = SECRET.test(variable) ? '' : ` (got "${String(present[variable])}")`;
    throw new ConfigError(variable, `${issue?.message ?? 'invalid'}${shown}`);
  }
  const e = parsed.data;
  const tlsParts = [e.TLS_CERT_FILE, e.TLS_KEY_FILE];
  if (e.MQTT_TLS_PORT !== undefined && tlsParts.some((p) => p === undefined)) {
    throw new ConfigError('MQTT_TLS_PORT', 'needs TLS_CERT_FILE and TLS_KEY_FILE');
  }
  if (e.BROKER_URL === undefined) {
    const set = (['BROKER_USERNAME', 'BROKER_PASSWORD', 'BROKER_CA_FILE', 'BROKER_CERT_FILE', 'BROKER_KEY_FILE'] as const).find(
      (name) => e[name] !== undefined,
    );
    if (set) throw new ConfigError('BROKER_URL', `must be set when ${set} is`);
  }
  if ((e.BROKER_CERT_FILE === undefined) !== (e.BROKER_KEY_FILE === undefined)) {
    throw new ConfigError('BROKER_CERT_FILE', 'BROKER_CERT_FILE and BROKER_KEY_FILE go together (a client certificate and its key)');
  }
  if (e.FALLBACK_URL === undefined && (e.FALLBACK_API_KEYS !== undefined || e.FALLBACK_MODEL !== undefined)) {
    throw new ConfigError('FALLBACK_URL', 'must be set when FALLBACK_API_KEYS or FALLBACK_MODEL is');
  }

  // Secure by default (Mosquitto 2.0): anonymous only while every listener is loopback-bound.
  const allLoopback = isLoopback(e.MQTT_HOST);
  const allowAnonymous = e.ALLOW_ANONYMOUS ?? allLoopback;
  // With BROKER_URL no listener opens: the plant's broker authenticates its devices.
  if (e.BROKER_URL === undefined && !allLoopback && e.AUTH_FILE === undefined && e.ALLOW_ANONYMOUS !== true) {
    throw new ConfigError(
      'MQTT_HOST',
      `${e.MQTT_HOST} is not a loopback address: set AUTH_FILE, or ALLOW_ANONYMOUS=true to accept anonymous devices from the network`,
    );
  }

  return {
    mqttHost: e.MQTT_HOST,
    mqttPort: e.MQTT_PORT,
    mqttTlsPort: e.MQTT_TLS_PORT,
    tlsCertFile: e.TLS_CERT_FILE,
    tlsKeyFile: e.TLS_KEY_FILE,
    tlsCaFile: e.TLS_CA_FILE,
    mqttWsPort: e.MQTT_WS_PORT,
    brokerUrl: e.BROKER_URL,
    brokerUsername: e.BROKER_USERNAME,
    brokerPassword: e.BROKER_PASSWORD,
    brokerCaFile: e.BROKER_CA_FILE,
    brokerCertFile: e.BROKER_CERT_FILE,
    brokerKeyFile: e.BROKER_KEY_FILE,
    brokerShareGroup: e.BROKER_SHARE_GROUP,
    brokerSessionExpiryS: e.BROKER_SESSION_EXPIRY_S,
    brokerConnections: e.BROKER_CONNECTIONS,
    instanceId: e.INSTANCE_ID,
    maxSessionExpiryS: e.MAX_SESSION_EXPIRY_S,
    httpHost: e.HTTP_HOST,
    httpPort: e.HTTP_PORT,
    adminToken: e.ADMIN_TOKEN,
    redisUrl: e.REDIS_URL,
    redisPrefix: e.REDIS_PREFIX,
    upstreamUrl: e.UPSTREAM_URL,
    upstreamApiKeys: e.UPSTREAM_API_KEYS ?? [],
    upstreamModel: e.UPSTREAM_MODEL,
    fallbackUrl: e.FALLBACK_URL,
    fallbackApiKeys: e.FALLBACK_API_KEYS ?? [],
    fallbackModel: e.FALLBACK_MODEL,
    breakerCooldownMs: e.BREAKER_COOLDOWN_MS,
    rateLimitRpm: e.RATE_LIMIT_RPM,
    rateLimitTpm: e.RATE_LIMIT_TPM,
    deviceRateLimitRpm: e.DEVICE_RATE_LIMIT_RPM,
    maxConcurrency: e.MAX_CONCURRENCY,
    priorityOffsetsMs: e.PRIORITY_OFFSETS_MS,
    queueMax: e.QUEUE_MAX,
    maxAttempts: e.MAX_ATTEMPTS,
    upstreamTimeoutMs: e.UPSTREAM_TIMEOUT_MS,
    maxRateLimitedRetries: e.MAX_RATE_LIMITED_RETRIES,
    maxPayloadBytes: e.MAX_PAYLOAD_BYTES,
    idempotencyTtlS: e.IDEMPOTENCY_TTL_S,
    cacheTtlS: e.CACHE_TTL_S,
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    configFile: e.CONFIG_FILE,
    authFile: e.AUTH_FILE,
    allowAnonymous,
    maxConnections: e.MAX_CONNECTIONS,
    connectTimeoutMs: e.CONNECT_TIMEOUT_MS,
    keepaliveLimitS: e.KEEPALIVE_LIMIT_S,
    drainTimeoutMs: e.DRAIN_TIMEOUT_MS,
    maxClientBacklogBytes: e.MAX_CLIENT_BACKLOG_BYTES,
    maxInflightQos2: e.MAX_INFLIGHT_QOS2,
    maxSubscriptions: e.MAX_SUBSCRIPTIONS,
    overloadDelayMs: e.OVERLOAD_DELAY_MS,
    maxPendingAdmissions: e.MAX_PENDING_ADMISSIONS,
    overloadQueueWaitMs: e.OVERLOAD_QUEUE_WAIT_MS,
    heapGrowingPercent: e.HEAP_GROWING_PERCENT,
    logLevel: e.LOG_LEVEL,
  };
}
