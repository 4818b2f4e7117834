// Where the broker's Redis connections report their failures and recoveries (cluster.ts, the
// session sweeper): the bridge passes one that logs a Redis outage once, not once per
// connection and retry; without one, each error is a warning.
import type { Logger } from 'pino';

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
export function warnEach(log: Logger, msg: string): ConnectionReport {
  return {
    fail: (source, err) => log.warn({ conn: source, err: err instanceof Error ? err.message : String(err) }, msg),
    ok: () => undefined,
  };
}
