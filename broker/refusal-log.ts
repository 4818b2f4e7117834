// A device refused again and again (a wrong password in a reconnect loop, a publish outside
// its topics every second) is logged the first time, then at most once per interval with the
// count of refusals since, per client and reason. broker/ may not import the bridge's
// repeating log (bridge/repeating-log.ts, one condition); this is its per-client kind.
import type { Logger } from 'pino';

/** At most one line per client and reason in this long. */
export const REFUSAL_LOG_INTERVAL_MS = 60_000;
/** Clients remembered at once: beyond, the one logged longest ago is forgotten (and logged again). */
const MAX_CLIENTS = 10_000;
/** Of a client id (a device's, up to 64 KiB in MQTT), what a key keeps: the memory stays bounded in bytes. */
const KEY_ID_CHARS = 256;

export class RefusalLog {
  /** Key → when it was last logged and the refusals since; in the order they were last logged. */
  private readonly seen = new Map<string, { at: number; since: number }>();

  constructor(
    private readonly log: Logger,
    private readonly intervalMs = REFUSAL_LOG_INTERVAL_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Logs the refusal (warn), or counts it when this client's same refusal was logged within the interval. */
  refused(clientId: string | undefined, reason: string, fields: Record<string, unknown>, msg: string): void {
    const key = `${(clientId ?? '').slice(0, KEY_ID_CHARS)}\u0000${reason}`;
    const at = this.now();
    const entry = this.seen.get(key);
    if (entry && at - entry.at < this.intervalMs) {
      entry.since += 1;
      return;
    }
    this.seen.delete(key);
    if (this.seen.size >= MAX_CLIENTS) this.seen.delete(this.seen.keys().next().value as string);
    this.seen.set(key, { at, since: 0 });
    this.log.warn(entry && entry.since > 0 ? { ...fields, repeats: entry.since, sinceMs: at - entry.at } : fields, msg);
  }
}
