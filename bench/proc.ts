// Per-process CPU and memory from /proc (Linux), so every process of a run is measured the
// same way whoever started it.
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** CPU seconds (user + system, all threads) the process has used so far. */
export function cpuSeconds(pid: number | 'self'): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name may hold spaces; fields are counted after its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / clockTicks();
}

/** Resident memory in MB (VmRSS). */
export function rssMb(pid: number | 'self'): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Math.round(Number(match[1]) / 1024) : 0;
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** CPU of several processes over an interval, as a share of one core each. */
export class CpuMeter {
  private start = new Map<string, number>();
  private startedAt = 0;

  constructor(private readonly sources: Record<string, () => number>) {}

  begin(): void {
    this.startedAt = performance.now();
    this.start = new Map(Object.entries(this.sources).map(([name, read]) => [name, read()]));
  }

  end(): Record<string, number> {
    const seconds = (performance.now() - this.startedAt) / 1000;
    const share: Record<string, number> = {};
    for (const [name, read] of Object.entries(this.sources)) {
      share[name] = Math.round(((read() - (this.start.get(name) ?? 0)) / seconds) * 100) / 100;
    }
    return share;
  }
}
