// The start-up check the contract asks for: a Redis that may evict keys silently drops
// queued jobs, locks and idempotency records, so only `maxmemory-policy noeviction` is accepted.
import type { Redis } from 'ioredis';

/**
 * - `{ ok: true }`: the policy is noeviction.
 * - `{ ok: false, problem }`: another policy; `problem` is the one line to log before exit 2.
 * - `{ ok: 'unknown', reason }`: the policy could not be read (CONFIG and INFO both refused,
 *   as some managed Redis services do); the caller should log a warning and go on.
 */
export type RedisPolicyCheck = { ok: true; policy: 'noeviction' } | { ok: false; policy: string; problem: string } | { ok: 'unknown'; reason: string };

export async function checkRedisPolicy(redis: Redis): Promise<RedisPolicyCheck> {
  let policy: string | undefined;
  let configError: string | undefined;
  try {
    // Reply: [name, value], or [] when the server does not know the parameter.
    const reply = (await redis.config('GET', 'maxmemory-policy')) as unknown;
    if (Array.isArray(reply) && typeof reply[1] === 'string') policy = reply[1];
    else configError = 'CONFIG GET maxmemory-policy returned nothing';
  } catch (err) {
    // Managed Redis often renames or forbids CONFIG ("unknown command", "NOPERM"): try INFO.
    configError = (err as Error).message;
  }
  if (policy === undefined) {
    try {
      policy = /^maxmemory_policy:(\S+)/m.exec(await redis.info('memory'))?.[1];
    } catch (err) {
      return { ok: 'unknown', reason: `CONFIG GET: ${configError}; INFO memory: ${(err as Error).message}` };
    }
    if (policy === undefined) {
      return { ok: 'unknown', reason: `CONFIG GET: ${configError}; INFO memory has no maxmemory_policy` };
    }
  }
  if (policy === 'noeviction') return { ok: true, policy };
  return {
    ok: false,
    policy,
    problem: `REDIS_URL: Redis maxmemory-policy is ${policy}; edge-ai-bridge needs noeviction ` + '(an evicted job or lock breaks every guarantee)',
  };
}

/** The scripts use `SET … NX GET`, which Redis accepts from 7.0: the problem line, or undefined. */
export async function checkRedisVersion(redis: Redis): Promise<string | undefined> {
  const version = /^redis_version:(\S+)/m.exec(await redis.info('server'))?.[1];
  const major = Number(version?.split('.')[0]);
  if (!Number.isFinite(major) || major >= 7) return undefined;
  return `Redis ${version ?? '?'} is too old; edge-ai-bridge needs Redis 7.0 or later`;
}
