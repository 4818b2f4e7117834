// Redis' own count of the commands it ran (INFO commandstats; commands inside Lua scripts
// count too), so a step can report Redis commands and Redis CPU per request.
import type { Redis } from 'ioredis';
import type { StepResult } from '../results.js';

/** Command name → calls so far. */
export type CommandCalls = Record<string, number>;

export async function commandCalls(admin: Redis): Promise<CommandCalls> {
  const info = await admin.info('commandstats');
  const calls: CommandCalls = {};
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[match[1] as string] = Number(match[2]);
  return calls;
}

/** What a step cost Redis per answered request: every command, the busiest ones, and CPU. */
export function redisPerRequest(
  before: CommandCalls,
  after: CommandCalls,
  /** Redis' CPU over the step, in cores, and the step's replies per second. */
  cpu: { cores: number; perS: number },
  answered: number,
): StepResult['redis'] {
  if (answered <= 0 || cpu.perS <= 0) return undefined;
  const delta = Object.entries(after)
    // The bench's own INFO polling is not the system's work.
    .filter(([name]) => name !== 'info')
    .map(([name, calls]) => [name, (calls - (before[name] ?? 0)) / answered] as const)
    .filter(([, perRequest]) => perRequest > 0)
    .sort((a, b) => b[1] - a[1]);
  const round = (n: number): number => Math.round(n * 100) / 100;
  return {
    commands: round(delta.reduce((total, [, perRequest]) => total + perRequest, 0)),
    cpuUs: Math.round((cpu.cores / cpu.perS) * 1e6),
    top: Object.fromEntries(delta.slice(0, 12).map(([name, perRequest]) => [name, round(perRequest)])),
  };
}
