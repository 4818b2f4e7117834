// CONFIG_FILE `settings`: any environment variable's value, by the variable's own name. The
// environment wins over the file, and the file over the default; each value's source is kept
// for `edge-ai-bridge config` and for the problems the checks report.
import { z } from 'zod';
import { closestName } from './typos.js';
import { SECRET_VARIABLES, VARIABLES, type Variable } from './variables.js';

export type Source = 'default' | 'file' | 'environment';

/**
 * Only the environment may set these: CONFIG_FILE names the file itself, and INSTANCE_ID names
 * one instance while one file is often shared by every instance of a fleet.
 */
export const ENVIRONMENT_ONLY: readonly Variable[] = ['CONFIG_FILE', 'INSTANCE_ID'];

const known: ReadonlySet<string> = new Set(VARIABLES);

/** Why a settings name is refused, or undefined when it is a variable the file may set. */
function nameProblem(name: string): string | undefined {
  if ((ENVIRONMENT_ONLY as readonly string[]).includes(name)) return `${name} can only be set in the environment`;
  if (!known.has(name)) return `not a variable the bridge reads: did you mean ${closestName(name, VARIABLES)}?`;
  return undefined;
}

// Names are checked by the key's schema, so a bad value elsewhere in the section cannot hide them.
const SettingName = z.string().check((ctx) => {
  const problem = nameProblem(ctx.value);
  if (problem !== undefined) ctx.issues.push({ code: 'custom', message: problem, input: ctx.value });
});

export const SettingsSchema = z
  // null: a name left without a value (`REDIS_URL:`), unset like an empty variable.
  .record(SettingName, z.union([z.string(), z.number(), z.boolean(), z.null()], { error: 'must be a string, a number or true/false' }), {
    // zod words a refused key its own way: keep the name's problem.
    error: (issue) => (issue.code === 'invalid_key' ? issue.issues[0]?.message : undefined),
  })
  .default({});

export type Settings = z.infer<typeof SettingsSchema>;

/** A variable's value as the checks read it: trimmed, an empty one counted as unset (as shells and compose files leave them). */
const given = (value: string | number | boolean | null | undefined): string | undefined =>
  value === undefined || value === null ? undefined : String(value).trim() || undefined;

export interface Merged {
  /** Each variable's raw value, from the environment or the file; undefined: its default. */
  values: Partial<Record<Variable, string>>;
  sources: Record<Variable, Source>;
}

/** The environment over the file's settings, variable by variable. */
export function mergeSettings(env: NodeJS.ProcessEnv, settings: Settings): Merged {
  const values: Partial<Record<Variable, string>> = {};
  const sources = {} as Record<Variable, Source>;
  for (const variable of VARIABLES) {
    const fromEnv = given(env[variable]);
    const fromFile = (ENVIRONMENT_ONLY as readonly string[]).includes(variable) ? undefined : given(settings[variable]);
    const value = fromEnv ?? fromFile;
    if (value !== undefined) values[variable] = value;
    sources[variable] = fromEnv !== undefined ? 'environment' : fromFile !== undefined ? 'file' : 'default';
  }
  return { values, sources };
}

/** The file's settings the environment overrides (logged at start, so a value that does not take is no surprise). */
export const overriddenSettings = (env: NodeJS.ProcessEnv, settings: Settings): string[] =>
  Object.keys(settings).filter((name) => given(settings[name]) !== undefined && given(env[name]) !== undefined);

export const REDACTED = '<redacted>';

/** A value as it may be printed: a secret variable's redacted, and so is a password inside a URL (redis://:pw@host). */
export function shownValue(variable: Variable, raw: string): string {
  return (SECRET_VARIABLES as readonly string[]).includes(variable) ? REDACTED : redactedUrl(raw);
}

/** A URL with its password redacted; any other text as it is. */
export function redactedUrl(raw: string): string {
  if (!raw.includes('@')) return raw;
  try {
    const { password } = new URL(raw);
    if (password === '') return raw;
    const redacted = raw.replace(`:${password}@`, `:${REDACTED}@`);
    return redacted === raw ? REDACTED : redacted;
  } catch {
    return raw;
  }
}
