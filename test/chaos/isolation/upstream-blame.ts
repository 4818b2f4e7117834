// Shared by the isolation tests about the upstream (lock-header, upstream-400, key-revocation):
// what the breaker shared through Redis has recorded, and each instance's /readyz.
import type { Redis } from 'ioredis';
import { redisKeys } from '../../../bridge/store/redis-keys.js';
import type { Harness } from '../../helpers/harness.js';

export interface BreakerRecord {
  /** c (closed), o (open), h (half-open); undefined when nothing was ever recorded. */
  state: string | undefined;
  /** Consecutive failures, and failures in the error-rate window. */
  consecutive: number;
  windowFailures: number;
}

/** The shared circuit of `provider` as Redis holds it. */
export async function breakerRecord(redis: Redis, prefix: string, provider = 'primary'): Promise<BreakerRecord> {
  const hash = await redis.hgetall(redisKeys(prefix).breaker(provider));
  const windowFailures = Object.entries(hash)
    .filter(([field]) => field.startsWith('wf:'))
    .reduce((sum, [, value]) => sum + Number(value), 0);
  return { state: hash.st, consecutive: Number(hash.fails ?? 0), windowFailures };
}

/** GET /readyz of an in-process instance: its status. */
export async function readyzOf(h: Harness): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${h.bridge.httpPort}/readyz`, { signal: AbortSignal.timeout(2000) });
  await res.arrayBuffer();
  return res.status;
}
