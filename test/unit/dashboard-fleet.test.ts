// The fleet's view made of instances' reports: rates added up over each one's own interval,
// latency percentiles from the merged histograms (not averaged), the worst circuit and key
// state any instance sees.
import { describe, expect, it } from 'vitest';
import { buildReport, fleetView } from '../../bridge/ops/dashboard/fleet.js';
import type { InstanceView } from '../../bridge/ops/dashboard/model.js';
import { DashboardRecorder } from '../../bridge/ops/dashboard/recorder.js';
import type { ProviderHealth } from '../../bridge/upstream/chain.js';

const view = (instance: string, seenAt: number): InstanceView => ({
  instance,
  version: 'test',
  startedAt: 0,
  broker: 'embedded',
  store: 'redis',
  connectedClients: 1,
  inFlight: 0,
  storeReachable: true,
  ready: true,
  notReady: [],
  seenAt,
});

const health = (circuit: ProviderHealth['circuit'], keyState: 'healthy' | 'cooling'): ProviderHealth => ({
  name: 'primary',
  circuit,
  available: circuit !== 'open',
  keys: { total: 1, healthy: keyState === 'healthy' ? 1 : 0, cooling: keyState === 'cooling' ? 1 : 0, revoked: 0, list: [{ id: 'abcd1234', state: keyState }] },
});

function ok(recorder: DashboardRecorder, id: string, totalMs: number): void {
  recorder.reply(
    {
      id,
      ok: true,
      model: 'm',
      content: 'x',
      finish_reason: 'stop',
      cached: false,
      attempts: 1,
      priority: 'normal',
      timing: { queued_ms: 0, upstream_ms: totalMs, total_ms: totalMs },
    } as never,
    'dev-1',
  );
}

describe('fleet view', () => {
  it('adds up rates, merges latency histograms and keeps the worst provider state', () => {
    const fast = new DashboardRecorder('a', () => 0);
    for (let i = 0; i < 99; i += 1) ok(fast, `f${i}`, 10);
    const slow = new DashboardRecorder('b', () => 0);
    ok(slow, 's1', 1000);
    slow.reply({ id: 'e1', ok: false, priority: 'high', error: { code: 'expired', message: 'late' } }, 'dev-2');
    const attempts = [{ name: 'primary', calls: 4, failures: 1, rateLimited: 2, latenciesMs: [100] }];
    const a = buildReport(view('a', 1000), fast.take(), [health('closed', 'healthy')], attempts); // over 1 s
    const b = buildReport(view('b', 2000), slow.take(), [health('half-open', 'cooling')], attempts); // over 2 s

    const { point, instances, providers } = fleetView([a, b], null, 5000, 1);
    expect(point.rps).toEqual({ critical: 0, high: 0.5, normal: 99.5, low: 0 });
    expect(point.outcomes).toEqual({ ok: 99.5, expired: 0.5 });
    // 100 ok replies: 99 at 10 ms, one at 1 s: p50 10 ms and p99 10 ms (99 of 100), not an average.
    expect(point.e2e.normal).toEqual({ p50: expect.closeTo(10, 0), p99: expect.closeTo(10, 0) });
    expect(point.e2e.high).toBeNull();
    expect(instances.map((i) => i.instance)).toEqual(['a', 'b']);
    expect(providers).toEqual([
      {
        provider: 'primary',
        circuit: 'half-open',
        available: true,
        keys: [{ id: 'abcd1234', state: 'cooling' }],
        callsPerS: 6,
        errorRate: 0.25,
        rateLimitedPerS: 3,
        latency: { p50: expect.closeTo(100, 0), p99: expect.closeTo(100, 0) }, // HDR: within 1 %
      },
    ]);
  });

  it('keeps the last replies of each device, newest first, and finds devices by part of their id', () => {
    let now = 0;
    const recorder = new DashboardRecorder('a', () => now);
    for (let i = 0; i < 25; i += 1) {
      now = i;
      ok(recorder, `r${i}`, 5);
    }
    const [found] = recorder.recentOf('DEV', 20);
    expect(found?.recent).toHaveLength(20);
    expect(found?.recent[0]).toMatchObject({ id: 'r24', outcome: 'ok', latencyMs: 5, instance: 'a', at: 24 });
    expect(recorder.recentOf('nobody', 20)).toEqual([]);
  });
});
