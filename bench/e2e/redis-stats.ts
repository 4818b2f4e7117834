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

/**
 * What a step cost Redis per answered request: every command, the busiest ones, and CPU. The
 * command counts span the step's lead-in and its replies, as its `answered` and its CPU do.
 */
export function redisOfStep(step: Pick<StepResult, 'answered' | 'achievedRate' | 'cpu'>, before: CommandCalls, after: CommandCalls): StepResult['redis'] {
  const { answered, achievedRate } = step;
  if (answered <= 0 || achievedRate <= 0) return undefined;
  const delta = Object.entries(after)
    // The bench's own INFO polling is not the system's work.
    .filter(([name]) => name !== 'info')
    .map(([name, calls]) => [name, (calls - (before[name] ?? 0)) / answered] as const)
    .filter(([, perRequest]) => perRequest > 0)
    .sort((a, b) => b[1] - a[1]);
  const round = (n: number): number => Math.round(n * 100) / 100;
  return {
    commands: round(delta.reduce((total, [, perRequest]) => total + perRequest, 0)),
    // Cores over replies per second: µs per reply, as the system's own µs/req.
    cpuUs: Math.round(((step.cpu.redis ?? 0) / achievedRate) * 1e6),
    top: Object.fromEntries(delta.slice(0, 12).map(([name, perRequest]) => [name, round(perRequest)])),
  };
}
