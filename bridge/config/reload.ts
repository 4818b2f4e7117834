// SIGHUP: CONFIG_FILE read again. Its templates, weights and budgets apply at once; the other
// parts (providers, chain, models, onlyListedModels, routing, prices, cache, breaker,
// embeddingModel, uns, settings) only at the next start, and a change to them is logged as such,
// naming the settings that changed. A bad file changes nothing.
import type { Logger } from '../logger.js';
import { parseConfigFile, type ConfigFile } from './config-file.js';

/** The parts of CONFIG_FILE a running bridge takes from a SIGHUP. */
export const LIVE_PARTS = ['templates', 'weights', 'budgets'] as const;
export type LiveParts = Pick<ConfigFile, (typeof LIVE_PARTS)[number]>;

/** The file as it reads now, or undefined (each problem logged) when it is bad; `started`: the file the bridge started with. */
export function rereadConfigFile(path: string | undefined, started: ConfigFile, log: Logger): ConfigFile | undefined {
  if (path === undefined) return undefined;
  const { file, problems } = parseConfigFile(path);
  if (!file) {
    for (const { problem } of problems) log.error({ problem }, `CONFIG_FILE not reloaded, the templates, weights and budgets in use stay: ${problem}`);
    return undefined;
  }
  const live: readonly string[] = LIVE_PARTS;
  const settings = changedSettings(started.settings, file.settings);
  const later = (Object.keys(file) as Array<keyof ConfigFile>).filter((k) =>
    k === 'settings' ? settings.length > 0 : !live.includes(k) && JSON.stringify(file[k]) !== JSON.stringify(started[k]),
  );
  if (later.length === 0) return file;
  const named = later.map((part) => (part === 'settings' ? `settings (${settings.join(', ')})` : part));
  log.warn({ parts: later, settings }, `CONFIG_FILE: ${named.join(', ')} changed, which a running bridge does not take: restart it to apply them`);
  return file;
}

/** The setting names added, removed or given another value. */
function changedSettings(before: ConfigFile['settings'], after: ConfigFile['settings']): string[] {
  const names = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...names].filter((name) => before[name] !== after[name]).sort();
}
