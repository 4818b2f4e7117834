// The start-up maxmemory-policy check, against real Redis servers: the shared one (which
// must be noeviction) and private ones started with the policy or restrictions under test.
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { checkRedisPolicy, checkRedisVersion } from '../../bridge/store/redis-check.js';
import { startPrivateRedis, type PrivateRedis } from '../../bench/redis-server.js';
import { connectRedis } from '../helpers/redis.js';

const shared = connectRedis();
const opened: Array<Redis | PrivateRedis> = [];

afterEach(async () => {
  for (const item of opened.splice(0).reverse()) {
    if (item instanceof Redis) item.disconnect();
    else await item.stop();
  }
});
afterAll(() => shared.disconnect());

async function privateRedis(args: string[]): Promise<PrivateRedis> {
  const server = await startPrivateRedis(args);
  opened.push(server);
  return server;
}

function connect(url: string, options: { username?: string; password?: string } = {}): Redis {
  // ioredis' ready check runs INFO, which the last case forbids (it would warn on stderr).
  const redis = new Redis(url, { maxRetriesPerRequest: 1, enableReadyCheck: false, ...options });
  opened.push(redis);
  return redis;
}

describe('checkRedisPolicy', () => {
  it('accepts the shared Redis, which runs noeviction', async () => {
    expect(await checkRedisPolicy(shared)).toEqual({ ok: true, policy: 'noeviction' });
  });

  it('refuses an evicting policy with one line naming REDIS_URL and the policy', async () => {
    const server = await privateRedis(['--maxmemory-policy', 'allkeys-lru']);
    const result = await checkRedisPolicy(connect(server.url));
    expect(result).toEqual({
      ok: false,
      policy: 'allkeys-lru',
      problem: 'REDIS_URL: Redis maxmemory-policy is allkeys-lru; edge-ai-bridge needs noeviction ' + '(an evicted job or lock breaks every guarantee)',
    });
  });

  it('falls back to INFO memory when CONFIG is renamed away ("unknown command")', async () => {
    const server = await privateRedis(['--maxmemory-policy', 'volatile-ttl', '--rename-command', 'CONFIG', '']);
    const redis = connect(server.url);
    await expect(redis.config('GET', 'maxmemory-policy')).rejects.toThrow(/unknown command/i);
    expect(await checkRedisPolicy(redis)).toMatchObject({ ok: false, policy: 'volatile-ttl' });
  });

  it('falls back to INFO memory when the user may not run CONFIG (NOPERM), and accepts noeviction', async () => {
    const server = await privateRedis(['--maxmemory-policy', 'noeviction']);
    await connect(server.url).call('ACL', 'SETUSER', 'app', 'on', '>secret', '~*', '&*', '+@all', '-config');
    const redis = connect(server.url, { username: 'app', password: 'secret' });
    await expect(redis.config('GET', 'maxmemory-policy')).rejects.toThrow(/NOPERM/);
    expect(await checkRedisPolicy(redis)).toEqual({ ok: true, policy: 'noeviction' });
  });

  it('says "unknown" with both reasons when neither CONFIG nor INFO is allowed', async () => {
    const server = await privateRedis(['--maxmemory-policy', 'allkeys-lru']);
    await connect(server.url).call('ACL', 'SETUSER', 'app', 'on', '>secret', '~*', '&*', '+@all', '-config', '-info');
    const result = await checkRedisPolicy(connect(server.url, { username: 'app', password: 'secret' }));
    expect(result.ok).toBe('unknown');
    if (result.ok !== 'unknown') return;
    expect(result.reason).toMatch(/^CONFIG GET: NOPERM.*; INFO memory: NOPERM/);
  });
});

describe('checkRedisVersion', () => {
  it('accepts the Redis the tests run on, and refuses one older than 7.0 by name', async () => {
    expect(await checkRedisVersion(shared)).toBeUndefined();
    const old = { info: async () => '# Server\r\nredis_version:6.2.14\r\n' } as unknown as Redis;
    expect(await checkRedisVersion(old)).toBe('Redis 6.2.14 is too old; edge-ai-bridge needs Redis 7.0 or later');
  });
});
