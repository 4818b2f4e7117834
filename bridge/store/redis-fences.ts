// Fencing numbers on Redis: every lock grant draws the next number of one counter ({p}:fence,
// lua/includes/claiming.lua), so the numbers of each lock key rise (what a fencing token must
// do) while Redis keeps one number, not a field per lock name ever used. 0.7 kept the latter
// ({p}:fences); its numbers are folded into the counter at start-up, so no lock's next fence
// is lower than one it was granted before.
import type { Redis } from 'ioredis';
import type { RedisKeys } from './redis-keys.js';

/** Lock names folded per step. */
const FOLD_BATCH = 500;

type Guard = <T>(pending: Promise<T>) => Promise<T>;
type Fold = (keys: string[], lockIds: string[]) => Promise<unknown>;

/** Moves 0.7's per-lock fences into the counter (lua/upgrade-fences.lua), a batch at a time. */
export async function foldOldFences(redis: Redis, keys: Pick<RedisKeys, 'oldFences' | 'fence'>, fold: Fold, guard: Guard): Promise<void> {
  let cursor = '0';
  // Each step deletes what it folded: scan (a pass may miss fields the hash rehashed) until none is left.
  while ((await guard(redis.hlen(keys.oldFences))) > 0) {
    const [next, flat] = await guard(redis.hscan(keys.oldFences, cursor, 'COUNT', FOLD_BATCH));
    cursor = next;
    const lockIds = flat.filter((_, i) => i % 2 === 0);
    if (lockIds.length > 0) await fold([keys.oldFences, keys.fence], lockIds);
  }
}
