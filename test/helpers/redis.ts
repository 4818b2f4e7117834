// Tests share the machine's Redis (127.0.0.1:6379): each gets its own key prefix and
// deletes only its own keys.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { deleteDeployment } from '../../bridge/store/redis-keys.js';
import { RedisStore } from '../../bridge/store/redis.js';
import type { Store } from '../../bridge/store/port.js';
import type { StoreUnderTest } from '../store/store-contract.js';

export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

export const uniquePrefix = (name = 't'): string => `test-${name}-${randomBytes(5).toString('hex')}`;

export function connectRedis(url = REDIS_URL): Redis {
  return new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: false });
}

/** Deletes every key of one deployment prefix (its keys all start with `{prefix}:`). */
export const deletePrefix = deleteDeployment;

/**
 * The Store contract's target on the Redis `connection()` gives (opened before the cases run):
 * each store opened on its own prefix, whose keys are deleted after the case.
 */
export function redisStoreUnderTest(connection: () => Redis): StoreUnderTest {
  const prefixes = new Map<Store, string>();
  return {
    durable: true,
    open: async (options) => {
      const prefix = uniquePrefix('store');
      const store = new RedisStore(connection(), { prefix, ...options });
      prefixes.set(store, prefix);
      return store;
    },
    cleanup: async (store) => {
      await deletePrefix(connection(), prefixes.get(store) ?? 'none');
      prefixes.delete(store);
    },
  };
}
