// What the bridge gives a device over its quota (DEVICE_RATE_LIMIT_RPM): at most one
// `rate_limited` reply a second and one log line per interval, however fast it publishes, and
// no store call while the store's last answer says it is still over (its publishes are
// refused here, before they are read). Per device, for this instance; the quota itself is the
// store's, shared by every instance.
import type { Logger } from '../logger.js';

export interface RefusalLimits {
  /** At most one rate_limited reply per device this often; the others are dropped and counted. */
  replyEveryMs: number;
  /** A device's refusals are logged once this often, with their count. */
  logEveryMs: number;
  /** Devices remembered at once; past it, the longest known is forgotten (its count logged first). */
  maxDevices: number;
}

export const REFUSAL_LIMITS: RefusalLimits = { replyEveryMs: 1000, logEveryMs: 10_000, maxDevices: 10_000 };

interface Over {
  /** Over its quota until then (ms), as the store last said. */
  until: number;
  lastReplyMs: number;
  /** Refusals since `since`, not yet logged. */
  refused: number;
  since: number;
}

export class DeviceRefusals {
  private readonly devices = new Map<string, Over>();
  private lastSweep = 0;

  constructor(
    private readonly logger: Logger,
    /** A refusal dropped without a reply (metrics). */
    private readonly onDropped: () => void = () => undefined,
    private readonly limits: RefusalLimits = REFUSAL_LIMITS,
  ) {}

  /** How long the device is still over its quota, as the store last said; undefined when it may not be. */
  retryAfter(deviceId: string, now: number): number | undefined {
    const over = this.devices.get(deviceId);
    return over && over.until > now ? over.until - now : undefined;
  }

  /** The store answered `rate_limited` for the device, free again in `retryAfterMs`. */
  over(deviceId: string, retryAfterMs: number, now: number): void {
    const known = this.devices.get(deviceId);
    if (known) {
      known.until = Math.max(known.until, now + retryAfterMs);
      return;
    }
    this.sweep(now);
    this.devices.set(deviceId, { until: now + retryAfterMs, lastReplyMs: -Infinity, refused: 0, since: now });
    this.logger.info({ deviceId, retryAfterMs }, `device ${deviceId} is over DEVICE_RATE_LIMIT_RPM: its refusals are answered at most once a second`);
  }

  /**
   * One `rate_limited` refusal of the device, or (`counted` false) a refusal the store could not
   * count, being unreachable, bounded as if the device were over: true when it gets a reply,
   * false when it is dropped.
   */
  refused(deviceId: string, now: number, counted = true): boolean {
    let over = this.devices.get(deviceId);
    if (!over && !counted) {
      // Bounded as `over` is: while the store is away every device may come through here.
      this.sweep(now);
      this.devices.set(deviceId, (over = { until: now, lastReplyMs: -Infinity, refused: 0, since: now }));
    }
    if (!over) return true;
    if (now - over.since >= this.limits.logEveryMs) this.flush(deviceId, over, now);
    over.refused += 1;
    if (now - over.lastReplyMs < this.limits.replyEveryMs) {
      this.onDropped();
      return false;
    }
    over.lastReplyMs = now;
    return true;
  }

  get size(): number {
    return this.devices.size;
  }

  private flush(deviceId: string, over: Over, now: number): void {
    if (over.refused > 0) {
      const seconds = Math.round((now - over.since) / 1000);
      this.logger.info({ deviceId, refused: over.refused }, `device ${deviceId}: ${over.refused} requests refused (rate_limited) in the last ${seconds} s`);
    }
    over.refused = 0;
    over.since = now;
  }

  /**
   * Every interval (or when full): forgets devices no longer over their quota, once their last
   * count is logged, and past maxDevices the longest known.
   */
  private sweep(now: number): void {
    if (this.devices.size < this.limits.maxDevices && now - this.lastSweep < this.limits.logEveryMs) return;
    this.lastSweep = now;
    for (const [deviceId, over] of this.devices) {
      if (over.until + this.limits.logEveryMs > now && this.devices.size < this.limits.maxDevices) continue;
      this.flush(deviceId, over, now);
      this.devices.delete(deviceId);
    }
  }
}
