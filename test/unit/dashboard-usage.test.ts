// The dashboard's "today" is the budgets' day: it starts at midnight in CONFIG_FILE's
// budgets.timeZone (UTC without one), whatever the zone of the machine the bridge runs on.
import { describe, expect, it } from 'vitest';
import { dashboardApi, type DashboardApiSources } from '../../bridge/ops/dashboard/api.js';
import { MemoryStore } from '../../bridge/store/memory.js';

const at = (iso: string): number => Date.parse(iso);
const NOW = at('2026-12-04T01:00:00Z'); // 10:00 in Tokyo

async function usageIn(timeZone: string) {
  const store = new MemoryStore();
  const record = { deviceId: 'cam-1', model: 'm', priority: 'normal' as const, promptTokens: 10, completionTokens: 5, costUsd: 0.001 };
  await store.answers.recordUsage(record, at('2026-12-03T14:30:00Z')); // Tokyo: 23:30 the day before
  await store.answers.recordUsage(record, at('2026-12-03T15:30:00Z')); // Tokyo: 00:30 today
  await store.answers.recordUsage(record, at('2026-12-04T00:30:00Z')); // Tokyo: 09:30 today; UTC: 00:30 today
  const sources = { store, clock: () => NOW, timeZone: () => timeZone, tokenSet: false, loopback: true } as unknown as DashboardApiSources;
  return dashboardApi(sources).usage();
}

describe('dashboard usage', () => {
  it("counts today from midnight in the budgets' time zone, and names that zone", async () => {
    const tokyo = await usageIn('Asia/Tokyo');
    expect(tokyo.timeZone).toBe('Asia/Tokyo');
    expect(tokyo.today.fromMs).toBe(at('2026-12-03T15:00:00Z'));
    expect(tokyo.today.total.requests).toBe(2);
    const utc = await usageIn('UTC');
    expect(utc.timeZone).toBe('UTC');
    expect(utc.today.total.requests).toBe(1);
    // The last 24 hours do not depend on the zone.
    expect(tokyo.last24h.total.requests).toBe(3);
    expect(utc.last24h.total.requests).toBe(3);
  });
});
