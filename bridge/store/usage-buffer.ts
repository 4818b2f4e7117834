// Usage counted in the instance and added to Redis in one call a second, rather than three or
// four increments per request. A clean stop flushes what is left; a crash (kill -9) loses at
// most the last second's counts (never a reply). A flush that fails keeps its counts for the next.
import type { UsageRecord } from './port.js';
import { hourOf } from './usage-report.js';

const FLUSH_MS = 1000;

/** Writes one hour's fields (field → amount); usage.lua in the Redis store. */
export type UsageWriter = (hour: number, amounts: Map<string, number>) => Promise<void>;

export class UsageBuffer {
  private hours = new Map<number, Map<string, number>>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;

  constructor(private readonly write: UsageWriter) {}

  add(record: UsageRecord, now: number): void {
    const hour = hourOf(now);
    let amounts = this.hours.get(hour);
    if (!amounts) this.hours.set(hour, (amounts = new Map()));
    const base = `${record.deviceId}\t${record.model}\t${record.priority}\t`;
    addTo(amounts, `${base}r`, 1);
    addTo(amounts, `${base}p`, record.promptTokens);
    addTo(amounts, `${base}c`, record.completionTokens);
    if (record.costUsd !== 0) addTo(amounts, `${base}usd`, record.costUsd);
    if (record.fairDelta) addTo(amounts, `\tf\t${record.priority}\t${record.deviceId}`, record.fairDelta);
    if (record.template !== undefined) {
      const byTemplate = `t\t${record.template}\t`;
      addTo(amounts, `${byTemplate}r`, 1);
      addTo(amounts, `${byTemplate}p`, record.promptTokens);
      addTo(amounts, `${byTemplate}c`, record.completionTokens);
      if (record.costUsd !== 0) addTo(amounts, `${byTemplate}usd`, record.costUsd);
    }
    this.schedule();
  }

  /** Writes everything counted so far; one flush at a time. */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    clearTimeout(this.timer);
    this.timer = undefined;
    const hours = this.hours;
    if (hours.size === 0) return;
    this.hours = new Map();
    this.flushing = this.writeAll(hours).finally(() => (this.flushing = undefined));
    await this.flushing;
  }

  private async writeAll(hours: Map<number, Map<string, number>>): Promise<void> {
    const pending = [...hours];
    for (let i = 0; i < pending.length; i++) {
      const [hour, amounts] = pending[i] as [number, Map<string, number>];
      try {
        await this.write(hour, amounts);
      } catch (err) {
        for (const [h, a] of pending.slice(i)) this.keep(h, a);
        throw err;
      }
    }
  }

  /** Counts a failed flush could not write, merged back for the next one. */
  private keep(failedHour: number, failed: Map<string, number>): void {
    for (const [field, amount] of failed) {
      let amounts = this.hours.get(failedHour);
      if (!amounts) this.hours.set(failedHour, (amounts = new Map()));
      addTo(amounts, field, amount);
    }
    this.schedule();
  }

  /** A flush a second from now, unless one is due already; a failed one keeps its counts (keep). */
  private schedule(): void {
    this.timer ??= setTimeout(() => void this.flush().catch(() => undefined), FLUSH_MS).unref();
  }
}

function addTo(amounts: Map<string, number>, field: string, amount: number): void {
  amounts.set(field, (amounts.get(field) ?? 0) + amount);
}
