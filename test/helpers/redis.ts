// Tests share the machine's Redis (127.0.0.1:6379): each gets its own key prefix and
// deletes only its own keys.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { deleteDeployment } from '../../bridge/store/redis-keys.js';

export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

export const uniquePrefix = (name = 't'): string => `test-${name}-${randomBytes(5).toString('hex')}`;

export function connectRedis(url = REDIS_URL): Redis {
  return new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: false });
}

/** Deletes every key of one deployment prefix (its keys all start with `{prefix}:`). */
export const deletePrefix = deleteDeployment;
