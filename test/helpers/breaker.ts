// Shared setup of the circuit-breaker tests: one config, an explicit clock, fresh circuit
// names, and Redis connections on a key prefix of the test file's own.
import type { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import type { BreakerConfig } from '../../bridge/model/circuit.js';
import { RedisBreakerStore } from '../../bridge/store/breaker-state.js';
import { connectRedis, deletePrefix, uniquePrefix } from './redis.js';

export const CONFIG: BreakerConfig = {
  consecutiveFailures: 3,
  errorRate: 0.5,
  windowMs: 10_000,
  minCalls: 6,
  cooldownMs: 5000,
  probeLeaseMs: 2000,
};

export const T0 = 1_700_000_000_000;

let circuitSeq = 0;
export const fresh = (): string => `p${(circuitSeq += 1)}`;

export interface BreakerRedis {
  connection(): Redis;
  /** A Redis store on the prefix, on a connection of its own (another instance). */
  redisStore(): RedisBreakerStore;
  prefix(): string;
}

/** Call at the top of a test file: the prefix is made before its tests, its keys deleted after them. */
export function breakerRedis(): BreakerRedis {
  const redisConnections: Redis[] = [];
  let prefix = '';

  beforeAll(() => {
    prefix = uniquePrefix('breaker');
  });

  afterAll(async () => {
    const [first] = redisConnections;
    if (first) await deletePrefix(first, prefix);
    for (const r of redisConnections) r.disconnect();
  });

  function connection(): Redis {
    const redis = connectRedis();
    redisConnections.push(redis);
    return redis;
  }

  return { connection, redisStore: () => new RedisBreakerStore(connection(), prefix), prefix: () => prefix };
}
