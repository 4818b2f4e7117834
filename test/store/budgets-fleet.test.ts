// Two instances on one Redis admitting requests against the same budget at once: together they
// never take it over its limit.
import { afterAll, describe, expect, it } from 'vitest';
import { RedisStore } from '../../bridge/store/redis.js';
import { connectRedis, deletePrefix, uniquePrefix } from '../helpers/redis.js';
import { baseTime, makeJob } from './contract/fixtures.js';

const redis = [connectRedis(), connectRedis()];
const prefix = uniquePrefix('budgets');
afterAll(async () => {
  await deletePrefix(redis[0]!, prefix);
  for (const r of redis) r.disconnect();
});

describe('budgets across instances', () => {
  it('gives two instances racing for one budget no more than its limit between them', async () => {
    const [a, b] = redis.map((r) => new RedisStore(r, { prefix })) as [RedisStore, RedisStore];
    const now = baseTime();
    const charge = {
      budget: 'fleet',
      period: '2026-12',
      subject: '*',
      unit: 'tokens' as const,
      limit: 1000,
      estimate: 7,
      exempt: false,
      resetAtMs: now + 86_400_000,
    };
    const limits = { deviceRpm: 10_000, queueMax: 10_000 };
    const attempts = Array.from({ length: 400 }, (_, i) =>
      (i % 2 === 0 ? a : b).queue.admit(
        { ...makeJob({ deviceId: `cam-${i % 7}`, id: `r-${i}`, priority: 'normal', arrivalMs: now }), budget: [charge] },
        limits,
        now,
      ),
    );
    const admitted = (await Promise.all(attempts)).filter((result) => result.kind === 'queued').length;
    expect(admitted).toBe(Math.floor(1000 / 7));
    const [use] = await a.operations.budgetUse([{ budget: 'fleet', period: '2026-12' }]);
    expect(use?.reserved).toBeCloseTo(admitted * 7, 6);
    expect(use!.reserved).toBeLessThanOrEqual(1000);
  });
});
