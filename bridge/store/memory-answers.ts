// The memory store's answers kept for reuse: the cache, the coalescing flights (which job
// calls the upstream for identical requests) and the usage by hour.
import { addMetric, addRecord, emptyReport, hourOf, hoursBetween, USAGE_DIMENSIONS } from './usage-report.js';
import { HOUR_MS, type CachedAnswer, type Lead, type UsageRecord, type UsageReport, type UsageTotals } from './port.js';

/** Usage hours are kept about a week, like the Redis store's hourly buckets. */
const USAGE_KEEP_MS = 8 * 24 * HOUR_MS;

export class AnswerCache {
  private readonly cache = new Map<string, { answer: CachedAnswer; expiresAt: number }>();
  private readonly flights = new Map<string, { jobKey: string; expiresAt: number }>();
  private readonly usageByHour = new Map<number, UsageReport>();

  cached(cacheKey: string, now: number): CachedAnswer | undefined {
    const entry = this.cache.get(cacheKey);
    return entry && entry.expiresAt > now ? entry.answer : undefined;
  }

  cacheSet(cacheKey: string, answer: CachedAnswer, ttlMs: number, now: number): void {
    this.cache.set(cacheKey, { answer, expiresAt: now + ttlMs });
  }

  /** The answer if cached, else the flight's leader: `jobKey` itself when no other job leads. */
  lead(cacheKey: string, jobKey: string, leaseMs: number, now: number): Lead {
    const answer = this.cached(cacheKey, now);
    if (answer) return { answer };
    const flight = this.flights.get(cacheKey);
    if (flight && flight.jobKey !== jobKey && flight.expiresAt > now) return { leader: flight.jobKey };
    this.flights.set(cacheKey, { jobKey, expiresAt: now + leaseMs });
    return { leader: jobKey };
  }

  unlead(cacheKey: string, jobKey: string): void {
    if (this.flights.get(cacheKey)?.jobKey === jobKey) this.flights.delete(cacheKey);
  }

  recordUsage(record: UsageRecord, now: number): void {
    const hour = hourOf(now);
    let report = this.usageByHour.get(hour);
    if (!report) {
      report = emptyReport(hour, hour + HOUR_MS - 1);
      this.usageByHour.set(hour, report);
    }
    addRecord(report, record);
  }

  usage(fromMs: number, toMs: number): UsageReport {
    const report = emptyReport(fromMs, toMs);
    for (const hour of hoursBetween(fromMs, toMs)) {
      const kept = this.usageByHour.get(hour);
      if (!kept) continue;
      for (const dimension of USAGE_DIMENSIONS) {
        for (const [name, totals] of Object.entries(kept[dimension])) {
          for (const metric of Object.keys(totals) as Array<keyof UsageTotals>) {
            addMetric(report, dimension, name, metric, totals[metric]);
          }
        }
      }
    }
    return report;
  }

  /** Forgets expired cache entries and usage older than a week. */
  sweep(now: number): void {
    for (const [key, entry] of this.cache) if (entry.expiresAt <= now) this.cache.delete(key);
    for (const hour of this.usageByHour.keys()) if (hour < now - USAGE_KEEP_MS) this.usageByHour.delete(hour);
  }
}
