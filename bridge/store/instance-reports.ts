// Each instance's latest operator-dashboard report, so the page on any instance shows the
// whole fleet. In memory: this instance's only. On Redis: one hash, field = instance id,
// value = "{expiresAtMs} {report}"; a reader drops what expired (a crashed instance's last
// report), so the hash never grows past the live instances.
import type { Redis } from 'ioredis';

export interface InstanceReports {
  /** Stores this instance's report; it counts as live until `now + ttlMs`. */
  put(instance: string, report: string, ttlMs: number, now: number): Promise<void>;
  /** Every live report (this instance's included), in no particular order. */
  live(now: number): Promise<string[]>;
}

export class MemoryReports implements InstanceReports {
  private readonly reports = new Map<string, { expiresAt: number; report: string }>();

  async put(instance: string, report: string, ttlMs: number, now: number): Promise<void> {
    this.reports.set(instance, { expiresAt: now + ttlMs, report });
  }

  async live(now: number): Promise<string[]> {
    for (const [instance, { expiresAt }] of this.reports) if (expiresAt <= now) this.reports.delete(instance);
    return [...this.reports.values()].map((r) => r.report);
  }
}

export class RedisReports implements InstanceReports {
  constructor(
    private readonly redis: Redis,
    /** `{prefix}:reports` */
    private readonly key: string,
  ) {}

  async put(instance: string, report: string, ttlMs: number, now: number): Promise<void> {
    await this.redis.hset(this.key, instance, `${now + ttlMs} ${report}`);
  }

  async live(now: number): Promise<string[]> {
    const all = await this.redis.hgetall(this.key);
    const live: string[] = [];
    const expired: string[] = [];
    for (const [instance, value] of Object.entries(all)) {
      const space = value.indexOf(' ');
      if (Number(value.slice(0, space)) > now) live.push(value.slice(space + 1));
      else expired.push(instance);
    }
    if (expired.length > 0) await this.redis.hdel(this.key, ...expired);
    return live;
  }
}
