// CONFIG_FILE: what the environment cannot say well — more providers, the chain order, a
// model map, routing by priority, prices — and, in `settings`, any variable's value. YAML or
// JSON, validated with zod; a bad file stops the start with a line naming CONFIG_FILE, the
// line and column, and the offending path in the file for each problem.
import { z } from 'zod';
import { ConfigError, PRIORITIES, type ConfigProblem, type Priority } from '../../contract/index.js';
import { BudgetsSchema } from './budgets.js';
import { ModelsSchema, modelProblems, PricesSchema, type Price } from './models.js';
import { WeightsSchema } from './fair-share.js';
import { TemplatesSchema } from './templates.js';
import { outputProblems } from './output.js';
import { UnsSchema } from './uns.js';
import { readConfigText, type FileFormat, type Locate } from './file-read.js';
import { overriddenSettings, SettingsSchema, type Settings } from './settings.js';
import type { EnvFields } from './variables.js';

export const DEFAULT_EMBEDDING_MODEL = 'text-embedding-3-small';

const httpUrl = z.string().refine((v) => {
  try {
    return ['http:', 'https:'].includes(new URL(v).protocol);
  } catch {
    return false;
  }
}, 'must be an http(s) URL');

const ProviderSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_-]{1,32}$/, 'must be 1 to 32 characters of A-Za-z0-9_-'),
  url: httpUrl,
  /** Keys in the file itself; prefer apiKeysEnv, which keeps secrets out of files. */
  apiKeys: z.array(z.string().min(1)).default([]),
  /** The name of an environment variable holding comma-separated keys. */
  apiKeysEnv: z.string().min(1).optional(),
  /** The model this provider uses when neither the request nor a route names one. */
  model: z.string().min(1).optional(),
  /** Per attempt; default UPSTREAM_TIMEOUT_MS. */
  timeoutMs: z.number().int().positive().optional(),
  connectTimeoutMs: z.number().int().positive().optional(),
  /** Sockets to this provider; default MAX_CONCURRENCY. */
  connections: z.number().int().positive().optional(),
  /**
   * The provider takes `response_format: {type: "json_schema", strict: true}` (OpenAI's
   * structured outputs); false: a template's output is asked for as `json_object` with the
   * schema in a system message.
   */
  structuredOutputs: z.boolean().default(true),
});

const RouteSchema = z.strictObject({
  provider: z.string().min(1).optional(),
  model: z.string().min(1).optional(),
});

const BreakerSchema = z.strictObject({
  /** Consecutive failed attempts that open the circuit. */
  consecutiveFailures: z.number().int().positive().default(5),
  /** Or: this share of failed attempts within windowMs (once minCalls were made). */
  errorRate: z.number().gt(0).max(1).default(0.5),
  windowMs: z.number().int().positive().default(30_000),
  minCalls: z.number().int().positive().default(20),
});

export const ConfigFileSchema = z.strictObject({
  /** Environment variables by name (the environment wins); settings.ts. */
  settings: SettingsSchema,
  providers: z.array(ProviderSchema).default([]),
  /** Provider names in the order they are tried; default: primary, fallback, then `providers`. */
  chain: z.array(z.string().min(1)).min(1).optional(),
  /** Requested model (or alias) → the provider and model name that serve it, and its max_tokens cap. */
  models: ModelsSchema,
  /** Devices may name only the models listed in `models` (a request naming none gets the default). */
  onlyListedModels: z.boolean().default(false),
  /** Priority class → provider and/or model, e.g. `low` to a cheaper model. */
  routing: z.partialRecord(z.enum(PRIORITIES), RouteSchema).default({}),
  /** Model → price per million input and output tokens, for the cost estimate; `*`: any other model. */
  prices: PricesSchema,
  cache: z.strictObject({ allowTemperature: z.boolean().default(false) }).default({ allowTemperature: false }),
  /** The model of embeddings requests (`input`) that name none; UPSTREAM_MODEL is a chat model. */
  embeddingModel: z.string().min(1).max(256).default(DEFAULT_EMBEDDING_MODEL),
  breaker: BreakerSchema.default({ consecutiveFailures: 5, errorRate: 0.5, windowMs: 30_000, minCalls: 20 }),
  /** Prompts a device names (`"template"`) instead of sending messages; re-read on SIGHUP. */
  templates: TemplatesSchema,
  /** Fair share within a priority class: device id or `*` pattern → weight (default 1). */
  weights: WeightsSchema,
  /** Tokens or cost per device, model, template or fleet, per day or month. */
  budgets: BudgetsSchema,
  /** The plant's namespace: typed answers published as retained tags under `root` (docs/scada.md). */
  uns: UnsSchema.optional(),
});

export type ConfigFile = z.infer<typeof ConfigFileSchema>;
export type { Price };
export type BreakerSettings = z.infer<typeof BreakerSchema>;

export interface ProviderSettings {
  name: string;
  baseUrl: string;
  apiKeys: string[];
  model: string | undefined;
  timeoutMs: number;
  connectTimeoutMs: number | undefined;
  connections: number;
  /** Takes a json_schema response format in strict mode (CONFIG_FILE `structuredOutputs`). */
  structuredOutputs: boolean;
}

export interface Route {
  provider: string | undefined;
  model: string | undefined;
}

/** Everything about upstreams, from the environment and CONFIG_FILE together. */
export interface UpstreamSettings {
  /** In the order they are tried. */
  chain: ProviderSettings[];
  models: Record<string, Route>;
  routing: Partial<Record<Priority, Route>>;
  prices: Record<string, Price>;
  cacheAllowsTemperature: boolean;
  breaker: BreakerSettings;
  defaultModel: string;
}

export interface ParsedConfigFile {
  /** Undefined when the file has a problem. */
  file?: ConfigFile;
  /** The `settings` section when it is good on its own, even if another part of the file is not. */
  settings: Settings;
  problems: ConfigProblem[];
  format?: FileFormat;
  /** "path:line:col" of a value in the file. */
  locate?: Locate;
}

/** CONFIG_FILE parsed, with every problem it has; its defaults when no file is named. */
export function parseConfigFile(path: string | undefined): ParsedConfigFile {
  if (path === undefined) return { file: ConfigFileSchema.parse({}), settings: {}, problems: [] };
  const read = readConfigText(path);
  if ('problem' in read) return { settings: {}, problems: [{ variable: 'CONFIG_FILE', problem: read.problem }] };
  const { data, format, locate } = read;
  const parsed = ConfigFileSchema.safeParse(data);
  const issues = parsed.success ? [...modelProblems(parsed.data), ...outputProblems(parsed.data.templates)] : parsed.error.issues;
  if (parsed.success && issues.length === 0) return { file: parsed.data, settings: parsed.data.settings, problems: [], format, locate };
  const settings = SettingsSchema.safeParse((data as { settings?: unknown } | null)?.settings);
  return {
    settings: settings.success ? settings.data : {},
    problems: issues.map((issue) => fileProblem(locate, issue)),
    format,
    locate,
  };
}

/** One line: where in the file (line, column and path), and what is wrong there. */
export function fileProblem(locate: Locate, issue: { path: readonly PropertyKey[]; message: string; code?: string; keys?: string[] }): ConfigProblem {
  // An unknown key is reported on its object, a refused name on itself: point at the key.
  const unknownKey = issue.code === 'unrecognized_keys' && issue.keys?.length === 1 ? issue.keys[0] : undefined;
  const at = unknownKey !== undefined ? locate([...issue.path, unknownKey], true) : locate(issue.path, issue.code === 'invalid_key');
  const where = issue.path.length ? issue.path.map(String).join('.') : '(top level)';
  return { variable: 'CONFIG_FILE', problem: `${at}: ${where}: ${issue.message}` };
}

/** What the file holds, in counts: the line the start logs and `check` prints. */
export function fileCounts(file: ConfigFile): Record<'templates' | 'weights' | 'budgets' | 'providers' | 'settings', number> {
  return {
    templates: Object.keys(file.templates).length,
    weights: Object.keys(file.weights).length,
    budgets: file.budgets.limits.length,
    providers: file.providers.length,
    settings: Object.keys(file.settings).length,
  };
}

/** The line the start logs: what the file loaded, and which of its settings the environment overrides. */
export function loadedLine(path: string, file: ConfigFile, env: NodeJS.ProcessEnv): { fields: Record<string, unknown>; message: string } {
  const counts = fileCounts(file);
  const overridden = overriddenSettings(env, file.settings);
  const said = Object.entries(counts)
    .map(([part, n]) => `${n} ${part}`)
    .join(', ');
  const more = overridden.length > 0 ? `; the environment overrides ${overridden.join(', ')}` : '';
  return { fields: { configFile: path, ...counts, overridden }, message: `CONFIG_FILE loaded: ${said}${more}` };
}

/**
 * Resolves the provider chain: `primary` from UPSTREAM_*, `fallback` from FALLBACK_*, then
 * the file's providers; checks that every name the file refers to exists.
 */
export function upstreamSettings(
  config: Pick<EnvFields, 'upstreamApiKeys' | 'upstreamModel' | 'fallbackUrl' | 'fallbackModel' | 'upstreamTimeoutMs' | 'maxConcurrency'> & {
    upstreamUrl: string;
    fallbackApiKeys: string[];
  },
  file: ConfigFile,
  env: NodeJS.ProcessEnv = process.env,
): UpstreamSettings {
  const base = { timeoutMs: config.upstreamTimeoutMs, connectTimeoutMs: undefined, connections: config.maxConcurrency, structuredOutputs: true };
  const all: ProviderSettings[] = [{ name: 'primary', baseUrl: config.upstreamUrl, apiKeys: config.upstreamApiKeys, model: undefined, ...base }];
  if (config.fallbackUrl !== undefined) {
    all.push({ name: 'fallback', baseUrl: config.fallbackUrl, apiKeys: config.fallbackApiKeys, model: config.fallbackModel, ...base });
  }
  for (const p of file.providers) {
    if (all.some((q) => q.name === p.name)) throw new ConfigError('CONFIG_FILE', `providers: name "${p.name}" is used twice`);
    const fromEnv =
      p.apiKeysEnv === undefined
        ? []
        : (env[p.apiKeysEnv] ?? '')
            .split(',')
            .map((k) => k.trim())
            .filter(Boolean);
    if (p.apiKeysEnv !== undefined && fromEnv.length === 0) {
      throw new ConfigError('CONFIG_FILE', `providers.${p.name}.apiKeysEnv: ${p.apiKeysEnv} is not set`);
    }
    all.push({
      name: p.name,
      baseUrl: p.url,
      apiKeys: [...p.apiKeys, ...fromEnv],
      model: p.model,
      timeoutMs: p.timeoutMs ?? base.timeoutMs,
      connectTimeoutMs: p.connectTimeoutMs,
      connections: p.connections ?? base.connections,
      structuredOutputs: p.structuredOutputs,
    });
  }
  const byName = (name: string, where: string): ProviderSettings => {
    const found = all.find((p) => p.name === name);
    if (!found) throw new ConfigError('CONFIG_FILE', `${where}: unknown provider "${name}" (known: ${all.map((p) => p.name).join(', ')})`);
    return found;
  };
  const chain = file.chain ? file.chain.map((name, i) => byName(name, `chain.${i}`)) : all;
  const route = (r: { provider?: string | undefined; model?: string | undefined }, where: string): Route => {
    if (r.provider !== undefined) byName(r.provider, `${where}.provider`);
    return { provider: r.provider, model: r.model };
  };
  return {
    chain,
    models: Object.fromEntries(Object.entries(file.models).map(([m, r]) => [m, route(r, `models.${m}`)])),
    routing: Object.fromEntries(Object.entries(file.routing).map(([p, r]) => [p, route(r, `routing.${p}`)])),
    prices: file.prices,
    cacheAllowsTemperature: file.cache.allowTemperature,
    breaker: file.breaker,
    defaultModel: config.upstreamModel,
  };
}
