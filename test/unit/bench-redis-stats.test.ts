// The bench's Redis figures per request: parsed from INFO commandstats, the bench's own INFO
// calls left out, divided by the requests answered.
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { commandCalls, redisOfStep } from '../../bench/e2e/redis-stats.js';

const INFO = [
  '# Commandstats',
  'cmdstat_evalsha:calls=300,usec=9000,usec_per_call=30.00',
  'cmdstat_hincrby:calls=1200,usec=600',
  'cmdstat_info:calls=50,usec=10',
  '',
].join('\r\n');

describe('bench Redis figures', () => {
  it('reads every command count from INFO commandstats', async () => {
    const admin = { info: async () => INFO } as unknown as Redis;
    expect(await commandCalls(admin)).toEqual({ evalsha: 300, hincrby: 1200, info: 50 });
  });

  it("gives commands and CPU per answered request, without the bench's own INFO calls", () => {
    const before = { evalsha: 100, hincrby: 400, info: 10 };
    const after = { evalsha: 400, hincrby: 1600, info: 60, get: 100 };
    // 100 replies over the lead-in and the step (the step's `answered` counts both), at 1000/s.
    const step = { answered: 100, achievedRate: 1000, cpu: { redis: 0.3 } };
    expect(redisOfStep(step, before, after)).toEqual({ commands: 16, cpuUs: 300, top: { hincrby: 12, evalsha: 3, get: 1 } });
    expect(redisOfStep({ ...step, answered: 0 }, before, after)).toBeUndefined();
  });
});
