// Where Redis is: one URL, or a primary that Redis Sentinel names (ioredis asks the sentinels
// which server is the primary now, and reconnects to the new one after a failover). Every
// connection the bridge and its broker open goes through newRedis, so all follow a failover.

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

/**
 * Where a connection's failures and recoveries go. The bridge passes one that logs a Redis
 * outage once, not once per connection and retry; without one, each error is a warning.
 */
export interface ConnectionReport {
  fail(source: string, err?: unknown): void;
  ok(source: string): void;
}

interface Observable {
  on(event: 'error', listener: (err: Error) => void): unknown;
  on(event: 'ready', listener: () => void): unknown;
}

/** A listener on `error` is needed anyway: without one ioredis prints every failed reconnect. */
export function reportConnection(conn: Observable, source: string, report: ConnectionReport): void {
  conn.on('error', (err: Error) => report.fail(source, err));
  conn.on('ready', () => report.ok(source));
}

/** Every error a warning, as a message: the default when nobody sums them up. */
export function warnEach(log: { warn(fields: object, msg: string): void }, msg: string): ConnectionReport {
  return {
    fail: (source, err) => log.warn({ conn: source, err: err instanceof Error ? err.message : String(err) }, msg),
    ok: () => undefined,
  };
}
