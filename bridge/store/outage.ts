// The store out of reach (Redis down, silent or refusing): one condition for every part that
// meets it (the store's connections, the broker's, the health watchdog, the claim loop, the
// reaper, lease renewal), so an outage is a start line, a line a minute and an end line.
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { RepeatingLog, type ConditionReport, type RepeatingLogOptions } from '../repeating-log.js';

export function storeOutage(logger: Logger, options?: RepeatingLogOptions): RepeatingLog {
  return new RepeatingLog(
    logger,
    {
      started: 'Redis unavailable: unready, retrying; new requests are answered unavailable meanwhile',
      repeating: 'Redis still unavailable',
      ended: 'Redis available again',
    },
    options,
  );
}

/** The store's own failures say `unavailable` while Redis is away; any other is a bug to log whole. */
export function isStoreUnavailable(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === 'unavailable';
}

/** Reports a failed store call to the outage when Redis is away, else logs it whole. */
export function storeFailed(outage: ConditionReport, source: string, err: unknown, log: () => void): void {
  if (isStoreUnavailable(err)) outage.fail(source, err);
  else log();
}

/** A listener on `error` is needed anyway: without one ioredis prints every failed reconnect. */
export function reportConnection(conn: Redis, source: string, outage: ConditionReport): void {
  conn.on('error', (err: Error) => outage.fail(source, err));
  conn.on('ready', () => outage.ok(source));
}
