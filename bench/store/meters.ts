// What the store benchmark reads besides wall time: commands and socket writes on its own
// Redis connections (unaffected by other users of a shared Redis), server-wide figures from
// INFO (approximate on a shared Redis), and the machine's busy share from /proc/stat.
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';

export interface Counters {
  commands: number;
  writes: number;
}

/** Counts the commands sent and the socket writes (a pipeline is one write) on one connection. */
export function countCalls(redis: Redis): Counters {
  const counters: Counters = { commands: 0, writes: 0 };
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = ((...args: Parameters<Redis['sendCommand']>) => {
    counters.commands += 1;
    return send(...args);
  }) as Redis['sendCommand'];
  const stream = (redis as unknown as { stream: NodeJS.WritableStream }).stream;
  const write = stream.write.bind(stream) as (...a: unknown[]) => boolean;
  (stream as unknown as { write: (...a: unknown[]) => boolean }).write = (...a: unknown[]) => {
    counters.writes += 1;
    return write(...a);
  };
  return counters;
}

export async function connect(redisUrl: string, autoPipeline: boolean): Promise<Redis> {
  const redis = new Redis(redisUrl, {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    enableAutoPipelining: autoPipeline,
    connectionName: 'edge-ai-bridge:store-bench',
  });
  await redis.connect();
  return redis;
}

/** Server-wide figures from INFO: approximate when others use the same Redis. */
export interface ServerSnapshot {
  cpuS: number;
  fcallCalls: number;
  fcallUsec: number;
  commands: number;
  /** Every command Redis ran, those inside scripts included (INFO commandstats). */
  allCalls: number;
}

export async function serverSnapshot(admin: Redis): Promise<ServerSnapshot> {
  const info = await admin.info('all');
  const num = (re: RegExp) => Number(re.exec(info)?.[1] ?? 0);
  return {
    cpuS: num(/^used_cpu_user_main_thread:([\d.]+)/m) + num(/^used_cpu_sys_main_thread:([\d.]+)/m),
    fcallCalls: num(/^cmdstat_fcall:calls=(\d+)/m),
    fcallUsec: num(/^cmdstat_fcall:calls=\d+,usec=(\d+)/m),
    commands: num(/^total_commands_processed:(\d+)/m),
    allCalls: [...info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)].reduce((total, m) => (m[1] === 'info' ? total : total + Number(m[2])), 0),
  };
}

export const round = (n: number, digits: number) => Math.round(n * 10 ** digits) / 10 ** digits;

export const cpuSeconds = (usage: NodeJS.CpuUsage) => (usage.user + usage.system) / 1e6;

export type MachineTicks = { busy: number; total: number } | undefined;

/** Busy and total jiffies of the whole machine (Linux /proc/stat); undefined elsewhere. */
export function machineTicks(): MachineTicks {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
    const ticks = line.trim().split(/\s+/).slice(1).map(Number);
    const total = ticks.reduce((a, b) => a + b, 0);
    const idle = (ticks[3] ?? 0) + (ticks[4] ?? 0);
    return { busy: total - idle, total };
  } catch {
    return undefined;
  }
}

/** Share of all CPUs busy between two readings (anything on the machine counts). */
export function machineBusy(a: MachineTicks, b: MachineTicks): number | undefined {
  if (!a || !b || b.total === a.total) return undefined;
  return round((b.busy - a.busy) / (b.total - a.total), 2);
}
