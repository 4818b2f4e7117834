// Configuration, read once at start: the environment (variables.ts) and CONFIG_FILE, whose
// `settings` the environment overrides (settings.ts). Every problem is reported at once, each
// on a line naming its variable (ConfigError).
import { ConfigError, type ConfigProblem } from '../../contract/index.js';
import type { RedisEndpoint } from './redis-endpoint.js';
import { fileProblem, parseConfigFile, upstreamSettings, type ConfigFile, type ParsedConfigFile } from './config-file.js';
import type { Locate } from './file-read.js';
import { modelEnvProblems } from './models.js';
import { mergeSettings, shownValue, type Merged } from './settings.js';
import { camelCase, EnvSchema, VARIABLES, type Env, type EnvFields, type Variable } from './variables.js';

export { DEFAULT_PRIORITY_OFFSETS_MS, VARIABLES } from './variables.js';

export type Config = Readonly<
  Omit<EnvFields, 'allowAnonymous' | 'fallbackApiKeys'> & {
    /** ALLOW_ANONYMOUS, or its default: true while the MQTT listener is loopback-bound. */
    allowAnonymous: boolean;
    fallbackApiKeys: string[];
    /** CONFIG_FILE, parsed (its defaults when unset). */
    file: ConfigFile;
    /** REDIS_URL and REDIS_SENTINELS together; undefined = in-memory coordination. */
    redis: RedisEndpoint | undefined;
  }
>;

const SECRET = /TOKEN|KEY|PASSWORD/;
const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;
export const isLoopback = (host: string): boolean => LOOPBACK.test(host);

/** A rule across variables: the variables it reads, and its problem when they disagree. */
interface Rule {
  reads: Variable[];
  problem(e: Env): ConfigProblem | undefined;
}

const BROKER_CLIENT_VARIABLES = ['BROKER_USERNAME', 'BROKER_PASSWORD', 'BROKER_CA_FILE', 'BROKER_CERT_FILE', 'BROKER_KEY_FILE'] as const;

const RULES: Rule[] = [
  {
    reads: ['MQTT_TLS_PORT', 'TLS_CERT_FILE', 'TLS_KEY_FILE'],
    problem: (e) =>
      e.MQTT_TLS_PORT !== undefined && (e.TLS_CERT_FILE === undefined || e.TLS_KEY_FILE === undefined)
        ? { variable: 'MQTT_TLS_PORT', problem: 'needs TLS_CERT_FILE and TLS_KEY_FILE' }
        : undefined,
  },
  {
    reads: ['BROKER_URL', ...BROKER_CLIENT_VARIABLES],
    problem: (e) => {
      const set = e.BROKER_URL === undefined ? BROKER_CLIENT_VARIABLES.find((name) => e[name] !== undefined) : undefined;
      return set ? { variable: 'BROKER_URL', problem: `must be set when ${set} is` } : undefined;
    },
  },
  {
    reads: ['BROKER_CERT_FILE', 'BROKER_KEY_FILE'],
    problem: (e) =>
      (e.BROKER_CERT_FILE === undefined) !== (e.BROKER_KEY_FILE === undefined)
        ? { variable: 'BROKER_CERT_FILE', problem: 'BROKER_CERT_FILE and BROKER_KEY_FILE go together (a client certificate and its key)' }
        : undefined,
  },
  {
    reads: ['FALLBACK_URL', 'FALLBACK_API_KEYS', 'FALLBACK_MODEL'],
    problem: (e) =>
      e.FALLBACK_URL === undefined && (e.FALLBACK_API_KEYS !== undefined || e.FALLBACK_MODEL !== undefined)
        ? { variable: 'FALLBACK_URL', problem: 'must be set when FALLBACK_API_KEYS or FALLBACK_MODEL is' }
        : undefined,
  },
  {
    reads: ['SPARKPLUG_GROUP_ID', 'SPARKPLUG_EDGE_NODE_ID', 'SPARKPLUG_PRIMARY_HOST_ID'],
    problem: (e) =>
      e.SPARKPLUG_GROUP_ID === undefined && (e.SPARKPLUG_EDGE_NODE_ID !== undefined || e.SPARKPLUG_PRIMARY_HOST_ID !== undefined)
        ? { variable: 'SPARKPLUG_GROUP_ID', problem: 'must be set when SPARKPLUG_EDGE_NODE_ID or SPARKPLUG_PRIMARY_HOST_ID is (it turns Sparkplug on)' }
        : undefined,
  },
  {
    reads: ['REDIS_URL', 'REDIS_SENTINELS', 'REDIS_WAIT_REPLICAS'],
    problem: (e) =>
      e.REDIS_WAIT_REPLICAS > 0 && e.REDIS_URL === undefined && e.REDIS_SENTINELS === undefined
        ? { variable: 'REDIS_WAIT_REPLICAS', problem: 'needs Redis: set REDIS_URL or REDIS_SENTINELS' }
        : undefined,
  },
  {
    // Secure by default (Mosquitto 2.0); with BROKER_URL no listener opens: the plant's broker
    // authenticates its devices.
    reads: ['BROKER_URL', 'MQTT_HOST', 'AUTH_FILE', 'ALLOW_ANONYMOUS'],
    problem: (e) =>
      e.BROKER_URL === undefined && !isLoopback(e.MQTT_HOST) && e.AUTH_FILE === undefined && e.ALLOW_ANONYMOUS !== true
        ? {
            variable: 'MQTT_HOST',
            problem: `${e.MQTT_HOST} is not a loopback address: set AUTH_FILE, or ALLOW_ANONYMOUS=true to accept anonymous devices from the network`,
          }
        : undefined,
  },
];

/** Each variable parsed on its own, so every bad one is found, not just the first. */
function parseVariables(given: Partial<Record<Variable, string>>): { values: Partial<Env>; problems: ConfigProblem[] } {
  const values: Record<string, unknown> = {};
  const problems: ConfigProblem[] = [];
  for (const variable of VARIABLES) {
    const raw = given[variable];
    const parsed = EnvSchema.shape[variable].safeParse(raw);
    if (parsed.success) {
      values[variable] = parsed.data;
      continue;
    }
    // Echo the value so the fix is obvious, unless it may be a secret.
    const shown = SECRET.test(variable) || raw === undefined ? '' : ` (got "${shownValue(variable, raw)}")`;
    problems.push({ variable, problem: `${parsed.error.issues[0]?.message ?? 'invalid'}${shown}` });
  }
  return { values: values as Partial<Env>, problems };
}

/** The rules whose variables all parsed; a rule over a bad variable would only repeat it. */
function ruleProblems(values: Partial<Env>, bad: Set<string>): ConfigProblem[] {
  return RULES.filter((rule) => rule.reads.every((v) => !bad.has(v)))
    .map((rule) => rule.problem(values as Env))
    .filter((p): p is ConfigProblem => p !== undefined);
}

function toConfig(e: Env, file: ConfigFile): Config {
  const fields = Object.fromEntries(Object.entries(e).map(([variable, value]) => [camelCase(variable), value])) as EnvFields;
  return Object.freeze({
    ...fields,
    allowAnonymous: e.ALLOW_ANONYMOUS ?? isLoopback(e.MQTT_HOST),
    fallbackApiKeys: e.FALLBACK_API_KEYS ?? [],
    file,
    redis:
      e.REDIS_URL === undefined && e.REDIS_SENTINELS === undefined
        ? undefined
        : { url: e.REDIS_URL, sentinels: e.REDIS_SENTINELS, sentinelName: e.REDIS_SENTINEL_NAME },
  });
}

/** The configuration read, or every problem it has, with where each variable's value came from. */
export interface Reading extends Merged {
  config?: Config;
  problems: ConfigProblem[];
  /** CONFIG_FILE as read (undefined: not named, or not a readable file). */
  configFile?: ParsedConfigFile;
}

/** CONFIG_FILE first (its settings are the environment's fallback), then every variable and rule. */
export function readConfiguration(env: NodeJS.ProcessEnv = process.env): Reading {
  const named = EnvSchema.shape.CONFIG_FILE.safeParse(env.CONFIG_FILE?.trim() || undefined);
  const configFile = named.success ? parseConfigFile(named.data) : undefined;
  const merged = mergeSettings(env, configFile?.settings ?? {});
  const { values, problems } = parseVariables(merged.values);
  const bad = new Set(problems.map((p) => p.variable));
  problems.push(...ruleProblems(values, bad));
  // A value from the file names its place there.
  const locate = configFile?.locate;
  for (const p of problems) {
    if (locate !== undefined && merged.sources[p.variable as Variable] === 'file') p.problem += ` (CONFIG_FILE ${locate(['settings', p.variable])})`;
  }
  problems.push(...(configFile?.problems ?? []));
  const file = configFile?.file;
  if (problems.length === 0 && file) {
    const config = toConfig(values as Env, file);
    problems.push(...checkConfigFile(config, env, locate));
    if (problems.length === 0) return { ...merged, config, problems, configFile };
  }
  return { ...merged, problems, ...(configFile ? { configFile } : {}) };
}

/** Stands in for an unset UPSTREAM_URL (npm start's simulator, known only once it runs) while checking. */
const UNRESOLVED_UPSTREAM_URL = 'http://127.0.0.1/v1';

/** The file's references (provider names, key variables), checked before anything starts. */
function checkConfigFile(config: Config, env: NodeJS.ProcessEnv, locateIn?: Locate): ConfigProblem[] {
  try {
    upstreamSettings({ ...config, upstreamUrl: config.upstreamUrl ?? UNRESOLVED_UPSTREAM_URL }, config.file, env);
    const locate = locateIn ?? ((): string => config.configFile ?? 'CONFIG_FILE');
    return modelEnvProblems(config.file, config.upstreamModel, config.maxTokensCap).map(({ path, message }) => fileProblem(locate, { path, message }));
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
}

/**
 * Reads the environment and CONFIG_FILE; throws one ConfigError listing every problem (bad
 * values, variables that disagree, a bad file or one naming providers that do not exist).
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const { config, problems } = readConfiguration(env);
  if (config !== undefined) return config;
  throw ConfigError.of(problems);
}
