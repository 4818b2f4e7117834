// The rolling windows (upstream rpm/tpm, the device quota) over a long random run: the Redis
// store's per-bucket counters answer exactly as the memory store's log, and neither ever
// lets more than the limit through in any rolling minute.
import { afterAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../bridge/store/memory.js';
import { RedisStore } from '../../bridge/store/redis.js';
import type { AdmitResult, RateTake, Store } from '../../bridge/store/port.js';
import { connectRedis, deletePrefix, uniquePrefix } from '../helpers/redis.js';
import { baseTime, makeJob, MINUTE } from './contract/fixtures.js';

const redis = connectRedis();
afterAll(() => redis.disconnect());

/** A small seeded generator (mulberry32), so a failure can be replayed. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Step =
  { kind: 'take'; at: number; tokens: number } | { kind: 'settle'; index: number; tokens: number } | { kind: 'admit'; at: number; device: string; n: number };

function plan(seed: number, start: number): Step[] {
  const next = random(seed);
  const steps: Step[] = [];
  let at = start;
  for (let n = 0; n < 600; n++) {
    // Mostly close together, now and then a long quiet spell (buckets leave while nobody looks).
    at += next() < 0.05 ? Math.floor(next() * 3 * MINUTE) : Math.floor(next() * 1500);
    const roll = next();
    if (roll < 0.5) steps.push({ kind: 'take', at, tokens: 1 + Math.floor(next() * 60) });
    else if (roll < 0.6) steps.push({ kind: 'settle', index: Math.floor(next() * steps.length), tokens: Math.floor(next() * 80) });
    else steps.push({ kind: 'admit', at, device: `cam-${Math.floor(next() * 3)}`, n });
  }
  return steps;
}

async function run(store: Store, steps: Step[]): Promise<Array<RateTake | AdmitResult | null>> {
  const out: Array<RateTake | AdmitResult | null> = [];
  for (const step of steps) {
    if (step.kind === 'take') out.push(await store.limits.takeRate(step.tokens, 20, 500, step.at));
    else if (step.kind === 'admit') {
      const job = makeJob({ deviceId: step.device, id: `r${step.n}`, priority: 'normal', arrivalMs: step.at });
      out.push(await store.queue.admit(job, { deviceRpm: 6, queueMax: 100_000 }, step.at));
    } else {
      const earlier = out[step.index];
      if (earlier && 'ok' in earlier && earlier.ok) await store.limits.settleTokens(earlier.callId, step.tokens);
      out.push(null);
    }
  }
  return out;
}

describe('rolling windows, memory and Redis alike', () => {
  it.each([1, 2, 3])('answers the same over a long random run (seed %i), never over the limit in any minute', async (seed) => {
    const prefix = uniquePrefix('windows');
    try {
      const steps = plan(seed, baseTime());
      const onRedis = await run(new RedisStore(redis, { prefix }), steps);
      const inMemory = await run(new MemoryStore(), steps);
      // Call ids name each store's own bookkeeping; what a caller decides on is the rest.
      const decisions = (results: typeof onRedis) => results.map((r) => (r && 'ok' in r && r.ok ? { ok: true } : r));
      expect(decisions(onRedis)).toEqual(decisions(inMemory));

      const taken = steps.filter((s, i) => s.kind === 'take' && (onRedis[i] as RateTake).ok).map((s) => (s as { at: number }).at);
      for (const at of taken) expect(taken.filter((t) => t > at - MINUTE && t <= at).length).toBeLessThanOrEqual(20);
      expect(taken.length).toBeGreaterThan(50); // the limit was reached and the window rolled
      expect(onRedis.filter((r) => r && 'kind' in r && r.kind === 'rate_limited').length).toBeGreaterThan(0);
    } finally {
      await deletePrefix(redis, prefix);
    }
  });
});
