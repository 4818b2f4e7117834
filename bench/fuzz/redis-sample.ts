// What one deployment holds in Redis at a moment: its keys (all under `{prefix}:`), grouped
// by family (the key's name without its per-device or per-request part), their memory, and
// the entries of every hash, list, set and sorted set.
import type { Redis } from 'ioredis';
import { redisKeys } from '../../bridge/store/redis-keys.js';

export interface RedisSample {
  atMs: number;
  keys: number;
  /** Sum of MEMORY USAGE over the deployment's keys. */
  bytes: number;
  /** The whole Redis' used_memory (other deployments included on a shared Redis). */
  usedMemory: number;
  /** Family → keys. */
  families: Record<string, number>;
  /** Key → entries, for collections (hash, list, set, zset); only in a full sample. */
  entries?: Record<string, number>;
}

/** `{p}:idem:dev/r1` → `idem`; `{p}:aedes:packet:b:7` → `aedes:packet`; `{p}:queue` → `queue`. */
export function keyFamily(key: string, base: string): string {
  const parts = key.slice(base.length).split(':');
  const head = parts[0] ?? '';
  return head === 'aedes' && parts.length > 1 ? `aedes:${parts[1]}` : head;
}

async function scanKeys(redis: Redis, pattern: string): Promise<string[]> {
  const found = new Set<string>();
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) found.add(key);
  } while (cursor !== '0');
  return [...found];
}

const SIZE_OF: Record<string, string> = { hash: 'hlen', list: 'llen', set: 'scard', zset: 'zcard' };

async function collectionEntries(redis: Redis, keys: string[]): Promise<Record<string, number>> {
  const types = (await redis.pipeline(keys.map((k) => ['type', k])).exec()) ?? [];
  const sized = keys.flatMap((key, i) => {
    const command = SIZE_OF[String(types[i]?.[1])];
    return command === undefined ? [] : [[key, command] as const];
  });
  const sizes = (await redis.pipeline(sized.map(([key, command]) => [command, key])).exec()) ?? [];
  return Object.fromEntries(sized.map(([key], i) => [key, Number(sizes[i]?.[1] ?? 0)]));
}

export async function sampleRedis(redis: Redis, prefix: string, full = false): Promise<RedisSample> {
  const { pattern, base } = redisKeys(prefix);
  const keys = await scanKeys(redis, pattern);
  const usage = (await redis.pipeline(keys.map((k) => ['memory', 'usage', k])).exec()) ?? [];
  const info = await redis.info('memory');
  const families: Record<string, number> = {};
  for (const key of keys) {
    const family = keyFamily(key, base);
    families[family] = (families[family] ?? 0) + 1;
  }
  const sample: RedisSample = {
    atMs: Date.now(),
    keys: keys.length,
    bytes: usage.reduce((sum, [, bytes]) => sum + (Number(bytes) || 0), 0),
    usedMemory: Number(/used_memory:(\d+)/.exec(info)?.[1] ?? NaN),
    families,
  };
  if (full) sample.entries = await collectionEntries(redis, keys);
  return sample;
}
