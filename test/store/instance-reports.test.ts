// The operator dashboard's shared reports, over every implementation: each instance's latest
// report, live until its time is up, then dropped (a crashed instance leaves the fleet).
import { afterAll, describe, expect, it } from 'vitest';
import { MemoryReports, RedisReports, type InstanceReports } from '../../bridge/store/instance-reports.js';
import { connectRedis, deletePrefix, uniquePrefix } from '../helpers/redis.js';

const redis = connectRedis();
const prefixes: string[] = [];
afterAll(async () => {
  for (const prefix of prefixes) await deletePrefix(redis, prefix);
  redis.disconnect();
});

const IMPLEMENTATIONS: Array<[string, () => InstanceReports]> = [
  ['memory', () => new MemoryReports()],
  [
    'redis',
    () => {
      const prefix = uniquePrefix('reports');
      prefixes.push(prefix);
      return new RedisReports(redis, `${prefix}:reports`);
    },
  ],
];

describe.each(IMPLEMENTATIONS)('instance reports (%s)', (_name, open) => {
  const now = Date.now();

  it("keeps each instance's latest report until its time is up", async () => {
    const reports = open();
    await reports.put('a', '{"n":1}', 6000, now);
    await reports.put('b', '{"n":2}', 2000, now);
    await reports.put('a', '{"n":3 with spaces}', 6000, now + 1000);
    expect((await reports.live(now + 1500)).sort()).toEqual(['{"n":2}', '{"n":3 with spaces}']);
    expect(await reports.live(now + 2000)).toEqual(['{"n":3 with spaces}']);
    expect(await reports.live(now + 7000)).toEqual([]);
  });

  it('is empty before any report', async () => {
    expect(await open().live(now)).toEqual([]);
  });
});
