// The bench's Redis figures per request: parsed from INFO commandstats and stats, the bench's
// own INFO calls left out, divided by the requests answered.
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { redisCounters, redisOfStep } from '../../bench/e2e/redis-stats.js';

const INFO = [
  '# Commandstats',
  'cmdstat_evalsha:calls=300,usec=9000,usec_per_call=30.00',
  'cmdstat_hincrby:calls=1200,usec=600',
  'cmdstat_info:calls=50,usec=10',
  '',
].join('\r\n');

const STATS = ['# Stats', 'total_commands_processed:1550', 'total_reads_processed:4321', 'total_writes_processed:4300', ''].join('\r\n');

describe('bench Redis figures', () => {
  it('reads every command count from INFO commandstats and the reads served from INFO stats', async () => {
    const admin = { info: async (section: string) => (section === 'stats' ? STATS : INFO) } as unknown as Redis;
    expect(await redisCounters(admin)).toEqual({ commands: { evalsha: 300, hincrby: 1200, info: 50 }, reads: 4321 });
  });

  it("gives commands, calls and CPU per answered request, without the bench's own INFO calls", () => {
    const before = { commands: { evalsha: 100, hincrby: 400, info: 10 }, reads: 1000 };
    const after = { commands: { evalsha: 400, hincrby: 1600, info: 60, get: 100 }, reads: 1350 };
    // 100 replies over the lead-in and the step (the step's `answered` counts both), at 1000/s.
    const step = { answered: 100, achievedRate: 1000, cpu: { redis: 0.3 } };
    expect(redisOfStep(step, before, after)).toEqual({ commands: 16, calls: 3, cpuUs: 300, top: { hincrby: 12, evalsha: 3, get: 1 } });
    expect(redisOfStep({ ...step, answered: 0 }, before, after)).toBeUndefined();
  });
});
