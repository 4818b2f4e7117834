// Where Redis is (REDIS_URL, REDIS_SENTINELS): one URL, or a primary that Redis Sentinel names
// (ioredis asks the sentinels which server is the primary now, and reconnects to the new one
// after a failover). Every connection the bridge and its broker open goes through newRedis,
// so all follow a failover; the broker gets it as its `openRedis` option.

export interface RedisEndpoint {
  /** redis:// or rediss:// URL; with sentinels only its credentials, database and TLS count. */
  url?: string | undefined;
  sentinels?: Array<{ host: string; port: number }> | undefined;
  /** The primary's name in the sentinels' configuration. */
  sentinelName?: string | undefined;
}

type RedisClass<T> = { new (url: string, options: object): T; new (options: object): T };

export function newRedis<T>(Redis: RedisClass<T>, endpoint: RedisEndpoint, options: object): T {
  if (endpoint.sentinels && endpoint.sentinels.length > 0) {
    return new Redis({ ...options, ...(endpoint.url ? primaryOptions(endpoint.url) : {}), sentinels: endpoint.sentinels, name: endpoint.sentinelName });
  }
  if (endpoint.url === undefined) throw new Error('a Redis endpoint needs REDIS_URL or REDIS_SENTINELS');
  if (!/^rediss?:\/\//i.test(endpoint.url)) throw new Error('REDIS_URL must start with redis:// or rediss://');
  return new Redis(endpoint.url, options);
}

/** What a URL says about the primary beyond its address: credentials, database, TLS. */
function primaryOptions(url: string): Record<string, unknown> {
  const u = new URL(url);
  const options: Record<string, unknown> = {};
  if (u.username) options.username = decodeURIComponent(u.username);
  if (u.password) options.password = decodeURIComponent(u.password);
  const db = Number(u.pathname.slice(1));
  if (u.pathname.length > 1 && Number.isInteger(db)) options.db = db;
  if (u.protocol === 'rediss:') options.tls = {};
  return options;
}
