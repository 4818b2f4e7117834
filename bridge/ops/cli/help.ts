// `edge-ai-bridge help`: the commands and every variable with its default, the defaults read
// from the schema itself so the help cannot drift from what the bridge does.
import { OPS_USAGE } from './store-commands-help.js';
import { VERSION } from '../../version.js';
import { EnvSchema, VARIABLES, type Variable } from '../../config/variables.js';

/** One line each; docs/configuration.md has the whole story. Typed so a new variable needs one. */
const MEANING: Record<Variable, string> = {
  MQTT_HOST: 'address the MQTT listener binds',
  MQTT_PORT: 'MQTT over TCP; 0 = a free port',
  MQTT_TLS_PORT: 'MQTT over TLS (with TLS_CERT_FILE and TLS_KEY_FILE)',
  TLS_CERT_FILE: 'certificate of the MQTT TLS listener',
  TLS_KEY_FILE: 'private key of the MQTT TLS listener',
  TLS_CA_FILE: 'set: client certificates signed by this CA are required (mTLS)',
  MQTT_WS_PORT: 'MQTT over WebSocket',
  MQTT_WS_ALLOWED_ORIGINS: 'comma-separated browser Origins the WebSocket listener accepts',
  BROKER_URL: "the plant's broker (mqtt://, mqtts://, ws://, wss://); set, no MQTT listener opens",
  BROKER_USERNAME: "the bridge's user name on that broker",
  BROKER_PASSWORD: "the bridge's password on that broker",
  BROKER_CA_FILE: 'TLS to that broker: a CA to trust',
  BROKER_CERT_FILE: 'TLS to that broker: a client certificate',
  BROKER_KEY_FILE: 'TLS to that broker: the client key',
  BROKER_SHARE_GROUP: 'shared-subscription group; instances in one group split the requests',
  BROKER_SESSION_EXPIRY_S: "how long that broker keeps the bridge's sessions after a disconnect",
  BROKER_CONNECTIONS: 'connections per instance to that broker, each a member of the share group',
  BROKER_ADOPT_AFTER_MS: 'with Redis: an instance silent this long is taken for dead and its broker sessions adopted; 0 = off',
  INSTANCE_ID: "names bridge/{INSTANCE_ID}/… and the client id on the plant's broker; generated when unset",
  MAX_SESSION_EXPIRY_S: 'embedded broker: the longest session expiry granted',
  MAX_OFFLINE_MESSAGES: 'embedded broker: messages kept for one offline persistent session',
  OFFLINE_MESSAGE_TTL_S: 'embedded broker: how long a message waits for an offline persistent session',
  MAX_SESSIONS_PER_DEVICE: 'embedded broker: persistent sessions one device id may hold',
  MAX_TOPIC_LENGTH: 'embedded broker: longest topic or topic filter, in bytes',
  SPARKPLUG_GROUP_ID: 'set, the bridge is a Sparkplug B Edge Node of this group',
  SPARKPLUG_EDGE_NODE_ID: 'the Edge Node id; unset: REDIS_PREFIX with Redis, else INSTANCE_ID, else edge-ai-bridge',
  SPARKPLUG_PRIMARY_HOST_ID: 'a primary host application whose STATE the Edge Node waits for',
  SPARKPLUG_DEVICE_IDLE_S: "plant's broker: a device with no answer for this long gets its DDEATH",
  HTTP_HOST: 'address the admin HTTP server binds',
  HTTP_PORT: 'admin HTTP: /healthz, /readyz, /metrics, /v1/…; 0 = a free port',
  ADMIN_TOKEN: 'bearer token for the /v1/… admin API, at least 16 characters; unset = /v1/… disabled',
  REDIS_URL: 'redis:// or rediss://, shared by every instance; unset = in memory, one instance',
  REDIS_TIMEOUT_MS: 'how long Redis may stay silent before it counts as unreachable',
  REDIS_SENTINELS: 'host:port,… of Redis Sentinels; the bridge follows the primary they name',
  REDIS_SENTINEL_NAME: "the primary's name in the sentinels' configuration",
  REDIS_WAIT_REPLICAS: "replicas that must have a request's admission before its PUBACK",
  REDIS_PREFIX: "the deployment's key prefix, so several can share one Redis",
  UPSTREAM_URL: 'base URL of an OpenAI-compatible API; unset = refused, or the bundled simulator under npm start',
  UPSTREAM_API_KEYS: 'comma-separated keys, rotated per call and on 401/429',
  UPSTREAM_MODEL: 'model used when a request names none',
  FALLBACK_URL: 'second provider, tried when the primary fails or its circuit is open',
  FALLBACK_API_KEYS: "the second provider's comma-separated keys",
  FALLBACK_MODEL: "the second provider's model",
  BREAKER_COOLDOWN_MS: 'how long an open circuit waits before one probe call',
  RATE_LIMIT_RPM: 'upstream requests per rolling minute',
  RATE_LIMIT_TPM: 'upstream tokens per rolling minute',
  DEVICE_RATE_LIMIT_RPM: 'publishes per rolling minute one device may make on its request topics',
  MAX_CONCURRENCY: 'upstream calls in flight',
  FAIR_SHARE: 'within a priority class, the devices share the upstream by service counted',
  PRIORITY_OFFSETS_MS: 'aging offsets per priority',
  QUEUE_MAX: 'queued requests; over it: queue_full',
  QUEUE_MAX_BYTES: 'the stored size of every queued request together; over it: queue_full',
  MAX_TOKENS_CAP: 'the largest max_tokens a request may ask for',
  DLQ_MAX: 'dead letters kept; over it the oldest are dropped',
  DLQ_MAX_BYTES: "the dead letters' stored size; over it the oldest are dropped",
  DLQ_TTL_S: 'how long a dead letter is kept',
  SCADA_MAX_TAGS: 'device-template pairs whose last good answer the SCADA outputs keep',
  SCADA_TAG_TTL_S: 'how long a last good answer not renewed is kept',
  MAX_ATTEMPTS: 'upstream attempts per request',
  OUTPUT_RETRIES: "times the model is asked again when its answer breaks the template's output",
  UPSTREAM_TIMEOUT_MS: 'upstream timeout per attempt',
  MAX_RATE_LIMITED_RETRIES: 'retries after a 429, which do not use up MAX_ATTEMPTS',
  MAX_PAYLOAD_BYTES: 'larger requests get payload_too_large',
  IMAGE_MAX_BYTES: 'a raw camera image over this gets payload_too_large',
  STREAM_FLUSH_MS: "a streamed request's chunks are at least this far apart",
  STREAM_FLUSH_BYTES: 'at most this many bytes of text per stream chunk',
  STREAM_QOS: 'QoS of stream chunks (0 or 1)',
  IDEMPOTENCY_TTL_S: 'how long a (deviceId, id) and its reply are remembered',
  CACHE_TTL_S: 'response cache lifetime; 0 turns the cache off',
  SHUTDOWN_GRACE_MS: 'how long SIGTERM waits for in-flight calls',
  CONFIG_FILE: 'YAML or JSON file: settings (any variable but CONFIG_FILE and INSTANCE_ID), providers, models, routing, prices, templates, weights, budgets',
  AUTH_FILE: 'JSON file of device, observer and operator credentials and roles',
  ALLOW_ANONYMOUS: 'anonymous devices; unset: true only on a loopback MQTT_HOST',
  MAX_CONNECTIONS: 'MQTT connections',
  CONNECT_TIMEOUT_MS: 'a socket that sends no CONNECT within this is closed',
  KEEPALIVE_LIMIT_S: 'largest keep-alive a client may ask for',
  DRAIN_TIMEOUT_MS: 'a subscriber whose socket stays full this long is disconnected',
  MAX_CLIENT_BACKLOG_BYTES: 'a client whose unsent outgoing bytes exceed this is disconnected',
  MAX_INFLIGHT_QOS2: 'inbound QoS 2 messages one client may hold un-released',
  MAX_SUBSCRIPTIONS: 'subscriptions per client',
  OVERLOAD_DELAY_MS: 'event-loop delay over which intake sheds load; 0 = off',
  MAX_PENDING_ADMISSIONS: 'requests waiting for the store before new requests are shed',
  OVERLOAD_QUEUE_WAIT_MS: 'queue wait over which intake sheds load; 0 = off',
  HEAP_GROWING_PERCENT: "V8's old-generation growing factor, percent; 0 = V8's own",
  LOG_LEVEL: 'fatal, error, warn, info, debug, trace or silent',
};

/** A heading before the first variable of each group (the schema keeps a group together). */
const GROUP_BEFORE: Partial<Record<Variable, string>> = {
  MQTT_HOST: 'MQTT listener (embedded broker)',
  BROKER_URL: "The plant's broker",
  INSTANCE_ID: 'Instance and sessions',
  SPARKPLUG_GROUP_ID: 'Sparkplug B',
  HTTP_HOST: 'Admin HTTP',
  REDIS_URL: 'Redis',
  UPSTREAM_URL: 'Upstream providers',
  RATE_LIMIT_RPM: 'Limits and queue',
  DLQ_MAX: 'Dead letters and SCADA outputs',
  MAX_ATTEMPTS: 'Requests',
  CONFIG_FILE: 'Files and access',
  MAX_CONNECTIONS: 'MQTT connections',
  OVERLOAD_DELAY_MS: 'Overload and process',
};

export const COMMANDS_USAGE = `usage: edge-ai-bridge [command]
  start     run the service (the default; configured by the environment variables below)
  check     validate the environment, CONFIG_FILE and AUTH_FILE without starting anything
  config [--json]
            print the effective configuration, each value's source (default, file,
            environment), secrets redacted
  health [--url http://HOST:PORT]
            ask a running bridge's /readyz (default: HTTP_HOST and HTTP_PORT); exit 1 if not ready
${OPS_USAGE}
  hash-password
            read a password from stdin, print its scrypt hash for AUTH_FILE
  version   print the version
  help      print this help`;

const WIDTH = 100;
const NAME_COLUMN = 28;

/** The default as an operator would write it; "unset" where the variable has none. */
export function defaultOf(variable: Variable): string {
  const parsed = EnvSchema.shape[variable].safeParse(undefined);
  if (!parsed.success) return 'required';
  const value: unknown = parsed.data;
  if (value === undefined || (Array.isArray(value) && value.length === 0)) return 'unset';
  if (Array.isArray(value)) return value.join(',');
  if (typeof value === 'object' && value !== null)
    return Object.entries(value)
      .map(([k, v]) => `${k}=${String(v)}`)
      .join(',');
  return String(value as string | number | boolean);
}

/** Words of `text` in lines of at most `width - indent` characters, each after `indent` spaces. */
export function wrap(text: string, indent: number, width = WIDTH): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line !== '' && indent + line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  lines.push(line);
  return lines.map((l) => ' '.repeat(indent) + l);
}

function variableLines(variable: Variable): string[] {
  const text = `${MEANING[variable]} [default: ${defaultOf(variable)}]`;
  const [first = '', ...rest] = wrap(text, NAME_COLUMN);
  const name = `  ${variable}`;
  const head = name.length < NAME_COLUMN ? name.padEnd(NAME_COLUMN) + first.trimStart() : `${name}\n${first}`;
  return [head, ...rest];
}

export function helpText(): string {
  const lines = [
    `edge-ai-bridge ${VERSION}`,
    '',
    COMMANDS_USAGE,
    '',
    'Environment variables, or CONFIG_FILE settings (docs/configuration.md has the details):',
  ];
  for (const variable of VARIABLES) {
    const group = GROUP_BEFORE[variable];
    if (group !== undefined) lines.push('', ` ${group}`);
    lines.push(...variableLines(variable));
  }
  return `${lines.join('\n')}\n`;
}

/** `--help`/`-h` or `--version` among the arguments: the text to print instead of starting. */
export function infoRequested(args: readonly string[]): string | undefined {
  if (args.includes('--help') || args.includes('-h') || args.includes('help')) return helpText();
  if (args.includes('--version') || args.includes('version')) return `${VERSION}\n`;
  return undefined;
}
