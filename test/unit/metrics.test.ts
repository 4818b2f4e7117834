// BridgeMetrics on its own: a store that never answers must not hang a scrape or a snapshot.
import { describe, expect, it } from 'vitest';
import { BridgeMetrics, STORE_SCRAPE_TIMEOUT_MS, type MetricsSources } from '../../bridge/ops/metrics/bridge-metrics.js';
import { parsePrometheus, sampleValue } from '../helpers/admin-http.js';
import { VERSION } from '../../bridge/version.js';

const sources = (queueDepth: MetricsSources['queueDepth']): MetricsSources => ({
  queueDepth,
  inFlight: () => 3,
  providers: () => [
    { name: 'primary', circuit: 'open' },
    { name: 'fallback', circuit: 'half-open' },
  ],
  connectedClients: () => 7,
  refusals: () => ({ publish: 2, subscribe: 1, connect: 4, slow: { backlog: 1, drain_timeout: 2 } }),
});

describe('BridgeMetrics', () => {
  it('answers a scrape without the queue depth when the store hangs', async () => {
    const metrics = new BridgeMetrics(sources(() => new Promise(() => undefined)));
    const started = Date.now();
    const samples = parsePrometheus(await metrics.render());
    expect(Date.now() - started).toBeLessThan(STORE_SCRAPE_TIMEOUT_MS + 1000);
    expect(samples.some((s) => s.name === 'edge_ai_bridge_queue_depth')).toBe(false);
    expect(sampleValue(samples, 'edge_ai_bridge_queue_depth_scrape_failures_total')).toBe(1);
    expect(sampleValue(samples, 'edge_ai_bridge_in_flight')).toBe(3);
    // One series per state, 1 for the current one (Prometheus' enum convention).
    const circuit = (provider: string): Record<string, number | undefined> =>
      Object.fromEntries(['closed', 'half-open', 'open'].map((state) => [state, sampleValue(samples, 'edge_ai_bridge_circuit_state', { provider, state })]));
    expect(circuit('primary')).toEqual({ closed: 0, 'half-open': 0, open: 1 });
    expect(circuit('fallback')).toEqual({ closed: 0, 'half-open': 1, open: 0 });
    expect(samples.find((s) => s.name === 'edge_ai_bridge_build_info')).toMatchObject({ labels: { version: VERSION }, value: 1 });
    expect(sampleValue(samples, 'edge_ai_bridge_connected_clients')).toBe(7);
    expect(sampleValue(samples, 'edge_ai_bridge_auth_refusals_total')).toBe(4);
    expect(sampleValue(samples, 'edge_ai_bridge_acl_refusals_total', { action: 'publish' })).toBe(2);
    expect(sampleValue(samples, 'edge_ai_bridge_acl_refusals_total', { action: 'subscribe' })).toBe(1);
    expect(sampleValue(samples, 'edge_ai_bridge_mqtt_clients_dropped_total', { reason: 'drain_timeout' })).toBe(2);
    const snapshot = await metrics.snapshot('bridge-x');
    expect(snapshot.queueDepth).toBeNull();
    expect(snapshot.upstream).toEqual([
      { provider: 'primary', circuit: 'open', state: 2 },
      { provider: 'fallback', circuit: 'half-open', state: 1 },
    ]);
  });

  it('counts lock grants and their wait, usage and cost, rate-limit waits and coalesced answers', async () => {
    const metrics = new BridgeMetrics(sources(async () => ({ critical: 1, high: 2, normal: 3, low: 4 })));
    metrics.claimed('high', 1000, true, 3500);
    metrics.claimed('low', 1000, false, 1200);
    metrics.usage('m', 10, 5, 0.25);
    metrics.usage('m', 1, 1, 0);
    metrics.rateLimitWait();
    metrics.coalescedAnswer();
    const samples = parsePrometheus(await metrics.render());
    expect(sampleValue(samples, 'edge_ai_bridge_lock_grants_total')).toBe(1);
    expect(sampleValue(samples, 'edge_ai_bridge_lock_wait_seconds_sum')).toBe(2.5);
    expect(sampleValue(samples, 'edge_ai_bridge_queue_wait_seconds_count', { priority: 'low' })).toBe(1);
    expect(sampleValue(samples, 'edge_ai_bridge_tokens_total', { model: 'm', kind: 'prompt' })).toBe(11);
    expect(sampleValue(samples, 'edge_ai_bridge_tokens_total', { model: 'm', kind: 'completion' })).toBe(6);
    expect(sampleValue(samples, 'edge_ai_bridge_cost_usd_total', { model: 'm' })).toBe(0.25);
    expect(sampleValue(samples, 'edge_ai_bridge_rate_limit_waits_total')).toBe(1);
    expect(sampleValue(samples, 'edge_ai_bridge_coalesced_total')).toBe(1);
    expect(sampleValue(samples, 'edge_ai_bridge_queue_depth', { priority: 'low' })).toBe(4);
  });
});
