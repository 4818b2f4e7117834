// Fair share within a priority class, end to end: a camera floods `normal` requests, nine
// devices send a few each right after it, two slots; the nine are served while the flood is
// still being worked through, not after it. On the memory store and on Redis.
import { afterAll, describe, expect, it } from 'vitest';
import { ask, startHarness, type Device } from '../helpers/harness.js';
import { connectRedis, deletePrefix, REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const FLOOD = 100;
const POLITE = 9;
const EACH = 3;

const redis = connectRedis();
const prefixes: string[] = [];
afterAll(async () => {
  for (const prefix of prefixes) await deletePrefix(redis, prefix);
  redis.disconnect();
});

const STORES: Array<[string, () => Record<string, string>]> = [
  ['memory', () => ({})],
  [
    'Redis',
    () => {
      const prefix = uniquePrefix('fair');
      prefixes.push(prefix);
      return { REDIS_URL, REDIS_PREFIX: prefix };
    },
  ],
];

describe.each(STORES)('fair share (%s store)', (_store, env) => {
  it('serves nine polite devices while a flooding one still waits, not after it', { timeout: 40_000 }, async () => {
    const h = await startHarness(
      { MAX_CONCURRENCY: '2', DEVICE_RATE_LIMIT_RPM: '100000', RATE_LIMIT_RPM: '100000', CACHE_TTL_S: '0', ...env() },
      { latencyMs: 100 },
    );
    try {
      const flooder = await h.device('flood-cam');
      const polite: Device[] = [];
      for (let i = 0; i < POLITE; i += 1) polite.push(await h.device(`polite-${i}`));
      // The flood is admitted (PUBACK) before any polite request arrives.
      await Promise.all(Array.from({ length: FLOOD }, (_, i) => flooder.publish('normal', ask(`f${i}`))));
      await Promise.all(polite.flatMap((d) => Array.from({ length: EACH }, (_, i) => d.publish('normal', ask(`p${i}`)))));
      for (const d of polite) await d.reply('p2', { timeoutMs: 20_000 });
      await flooder.reply(`f${FLOOD - 1}`, { timeoutMs: 30_000 });

      for (const d of polite) expect(d.replies.map((r) => r.ok)).toEqual([true, true, true]);
      expect(flooder.replies.filter((r) => r.ok)).toHaveLength(FLOOD);
      // First come, first served would call the upstream for all 100 of the flood before any of
      // the nine's. Sharing the slots, the nine's 27 go out among the flood's next few, and
      // most of the flood is still to come after the last of them.
      const order = h.upstream.requests.map((r) => (JSON.stringify(r.body).includes('question p') ? 'p' : 'f'));
      expect(order.filter((who) => who === 'p')).toHaveLength(POLITE * EACH);
      expect(order.slice(order.lastIndexOf('p')).filter((who) => who === 'f').length).toBeGreaterThanOrEqual(40);
    } finally {
      await h.close();
    }
  });
});
