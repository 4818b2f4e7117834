// Redis' own count of the commands it ran (INFO commandstats; commands inside Lua scripts
// count too) and of the calls it read (INFO stats: one read per round trip, however many
// commands a pipelined write carries), so a step can report Redis commands, calls and CPU per
// request.
import type { Redis } from 'ioredis';
import type { StepResult } from '../results.js';

/** Command name → calls so far. */
export type CommandCalls = Record<string, number>;

export interface RedisCounters {
  commands: CommandCalls;
  /** Reads Redis has served (total_reads_processed): its round trips. */
  reads: number;
}

export async function redisCounters(admin: Redis): Promise<RedisCounters> {
  const [commandstats, stats] = await Promise.all([admin.info('commandstats'), admin.info('stats')]);
  const commands: CommandCalls = {};
  for (const match of commandstats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) commands[match[1] as string] = Number(match[2]);
  return { commands, reads: Number(/^total_reads_processed:(\d+)/m.exec(stats)?.[1] ?? 0) };
}

/**
 * What a step cost Redis per answered request: every command, the busiest ones, and CPU. The
 * command counts span the step's lead-in and its replies, as its `answered` and its CPU do.
 */
export function redisOfStep(step: Pick<StepResult, 'answered' | 'achievedRate' | 'cpu'>, before: RedisCounters, after: RedisCounters): StepResult['redis'] {
  const { answered, achievedRate } = step;
  if (answered <= 0 || achievedRate <= 0) return undefined;
  // The bench's own INFO calls are reads too, but not the system's.
  const infoCalls = (after.commands.info ?? 0) - (before.commands.info ?? 0);
  const delta = Object.entries(after.commands)
    // The bench's own INFO polling is not the system's work.
    .filter(([name]) => name !== 'info')
    .map(([name, calls]) => [name, (calls - (before.commands[name] ?? 0)) / answered] as const)
    .filter(([, perRequest]) => perRequest > 0)
    .sort((a, b) => b[1] - a[1]);
  const round = (n: number): number => Math.round(n * 100) / 100;
  return {
    commands: round(delta.reduce((total, [, perRequest]) => total + perRequest, 0)),
    calls: round((after.reads - before.reads - infoCalls) / answered),
    // Cores over replies per second: µs per reply, as the system's own µs/req.
    cpuUs: Math.round(((step.cpu.redis ?? 0) / achievedRate) * 1e6),
    top: Object.fromEntries(delta.slice(0, 12).map(([name, perRequest]) => [name, round(perRequest)])),
  };
}
