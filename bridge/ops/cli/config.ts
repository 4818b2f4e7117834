// `edge-ai-bridge config [--json]`: the configuration the service would start with, each
// variable's value and where it came from (default, CONFIG_FILE, environment), secrets
// redacted; then what CONFIG_FILE holds. Starts nothing.
import { fileCounts, type ConfigFile } from '../../config/config-file.js';
import { readConfiguration, type Config } from '../../config/config.js';
import { REDACTED, redactedUrl, shownValue, type Source } from '../../config/settings.js';
import { VARIABLES, type Variable } from '../../config/variables.js';
import { defaultOf } from './help.js';
import { table } from './tables.js';

export interface ConfigEntry {
  variable: Variable;
  value: string;
  source: Source;
  /** Where in CONFIG_FILE, for a value from the file. */
  at?: string;
  /** The environment's value wins over one CONFIG_FILE settings also gives. */
  overridesFile?: true;
}

export interface ConfigReport {
  configFile: { path: string; format: string; counts: ReturnType<typeof fileCounts> } | null;
  variables: ConfigEntry[];
  /** CONFIG_FILE's parts but `settings` (shown above as variables), keys in the file redacted. */
  file: Omit<ConfigFile, 'settings'>;
}

/** The report, or the problems that would stop the start. */
export function configReport(env: NodeJS.ProcessEnv = process.env): { report?: ConfigReport; problems: string[] } {
  const reading = readConfiguration(env);
  const { config, values, sources, configFile } = reading;
  if (config === undefined) return { problems: reading.problems.map((p) => `${p.variable}: ${p.problem}`) };
  const variables = VARIABLES.map((variable): ConfigEntry => {
    const raw = values[variable];
    const entry: ConfigEntry = { variable, value: raw === undefined ? defaultOf(variable) : shownValue(variable, raw), source: sources[variable] };
    if (sources[variable] === 'file' && configFile?.locate) entry.at = configFile.locate(['settings', variable]);
    if (sources[variable] === 'environment' && config.file.settings[variable] !== undefined) entry.overridesFile = true;
    return entry;
  });
  return {
    problems: [],
    report: {
      configFile: config.configFile === undefined ? null : { path: config.configFile, format: configFile?.format ?? 'json', counts: fileCounts(config.file) },
      variables,
      file: redactedFile(config),
    },
  };
}

function redactedFile({ file }: Config): Omit<ConfigFile, 'settings'> {
  const { settings: _, ...rest } = file;
  return { ...rest, providers: rest.providers.map((p) => ({ ...p, url: redactedUrl(p.url), apiKeys: p.apiKeys.map(() => REDACTED) })) };
}

export function configText(report: ConfigReport): string {
  const sourceOf = (e: ConfigEntry): string => (e.at !== undefined ? `${e.source} (${e.at})` : e.overridesFile ? `${e.source} (over the file's)` : e.source);
  const rows = report.variables.map((e) => [e.variable, e.value, sourceOf(e)]);
  const parts = [table(['variable', 'value', 'source'], rows)];
  const { configFile, file } = report;
  if (configFile === null) parts.push('CONFIG_FILE: none');
  else {
    const counts = Object.entries(configFile.counts)
      .map(([part, n]) => `${n} ${part}`)
      .join(', ');
    const lines = [`CONFIG_FILE ${configFile.path} (${configFile.format}): ${counts}`];
    const named = (label: string, names: string[]): void => {
      if (names.length > 0) lines.push(`  ${label}: ${names.join(', ')}`);
    };
    named(
      'providers',
      file.providers.map((p) => `${p.name} ${redactedUrl(p.url)}`),
    );
    named('chain', file.chain ?? []);
    named('templates', Object.keys(file.templates));
    named(
      'budgets',
      file.budgets.limits.map((l) => l.name),
    );
    named(
      'weights',
      Object.entries(file.weights).map(([device, w]) => `${device}=${w}`),
    );
    named('models', Object.keys(file.models));
    parts.push(lines.join('\n'));
  }
  return `${parts.join('\n\n')}\n`;
}

/** Exit 0 with the report, or 2 with one line per problem (as `check`). */
export function runConfig(args: readonly string[], env: NodeJS.ProcessEnv = process.env): void {
  const unknown = args.filter((a) => a !== '--json');
  if (unknown.length > 0) {
    process.stderr.write(`edge-ai-bridge: usage: config [--json]\n`);
    process.exit(2);
  }
  const { report, problems } = configReport(env);
  if (report === undefined) {
    for (const problem of problems) process.stderr.write(`edge-ai-bridge: ${problem}\n`);
    process.exit(2);
  }
  process.stdout.write(args.includes('--json') ? `${JSON.stringify(report, null, 2)}\n` : configText(report));
}
