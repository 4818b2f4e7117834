// /metrics (Prometheus text, per-instance registry) and the bridge/{instanceId}/metrics snapshot.
import { afterEach, describe, expect, it } from 'vitest';
import { topics } from '../../contract/index.js';
import type { MetricsSnapshot } from '../../bridge/ops/metrics/bridge-metrics.js';
import { ask, startHarness, type Harness } from '../helpers/harness.js';
import { parsePrometheus, sampleValue, scrape, startBridgeWith } from '../helpers/admin-http.js';

const P = 'edge_ai_bridge_';

describe('/metrics', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('parses as Prometheus text, and its counters move with traffic', async () => {
    h = await startHarness();
    const before = await scrape(h.bridge);
    expect(before.length).toBeGreaterThan(0);
    for (const p of ['critical', 'high', 'normal', 'low']) {
      expect(sampleValue(before, `${P}queue_depth`, { priority: p })).toBe(0);
    }
    expect(sampleValue(before, `${P}circuit_state`, { provider: 'primary', state: 'closed' })).toBe(1);
    expect(sampleValue(before, `${P}circuit_state`, { provider: 'primary', state: 'open' })).toBe(0);
    expect(before.some((s) => s.name === `${P}in_flight`)).toBe(true);

    const device = await h.device('cam-1');
    await device.publish('high', ask('m-1', 'same question'));
    const [first] = await device.reply('m-1');
    expect(first).toMatchObject({ ok: true, cached: false });
    const model = first?.ok ? first.model : '?';
    const afterOk = await scrape(h.bridge);
    expect(sampleValue(afterOk, `${P}requests_total`, { priority: 'high', outcome: 'ok' })).toBe(
      sampleValue(before, `${P}requests_total`, { priority: 'high', outcome: 'ok' }) + 1,
    );
    expect(sampleValue(afterOk, `${P}upstream_latency_seconds_count`, { provider: 'primary' })).toBe(
      sampleValue(before, `${P}upstream_latency_seconds_count`, { provider: 'primary' }) + 1,
    );
    expect(sampleValue(afterOk, `${P}queue_wait_seconds_count`, { priority: 'high' })).toBe(1);
    expect(sampleValue(afterOk, `${P}tokens_total`, { model, kind: 'prompt' })).toBe(first?.ok ? first.usage?.prompt_tokens : -1);
    expect(sampleValue(afterOk, `${P}tokens_total`, { model, kind: 'completion' })).toBe(first?.ok ? first.usage?.completion_tokens : -1);
    expect(sampleValue(afterOk, `${P}connected_clients`)).toBe(1);

    // The same question again (another id) is answered from the cache.
    await device.publish('high', ask('m-2', 'same question'));
    expect((await device.reply('m-2'))[0]).toMatchObject({ ok: true, cached: true });
    const afterCached = await scrape(h.bridge);
    expect(sampleValue(afterCached, `${P}cache_hits_total`)).toBe(sampleValue(afterOk, `${P}cache_hits_total`) + 1);
    expect(sampleValue(afterCached, `${P}requests_total`, { priority: 'high', outcome: 'cached' })).toBe(1);
    expect(sampleValue(afterCached, `${P}upstream_latency_seconds_count`, { provider: 'primary' })).toBe(1);

    // A request with a lock counts one lock grant.
    await device.publish('normal', ask('m-lock', 'locked question', { lock: 'line-3/arm' }));
    await device.reply('m-lock');
    expect(sampleValue(await scrape(h.bridge), `${P}lock_grants_total`)).toBe(1);

    // Errors are counted by code, and requests without a valid priority under "none".
    await device.publish('high', 'not json');
    await device.publish('urgent', ask('m-3'));
    await device.reply(null);
    await device.reply('m-3');
    const afterErrors = await scrape(h.bridge);
    expect(sampleValue(afterErrors, `${P}requests_total`, { priority: 'high', outcome: 'invalid_request' })).toBe(1);
    expect(sampleValue(afterErrors, `${P}requests_total`, { priority: 'none', outcome: 'invalid_request' })).toBe(1);
  });

  it('counts ACL refusals read from the broker at scrape time', async () => {
    h = await startHarness();
    const device = await h.device('cam-2');
    await device.client.subscribeAsync('devices/other/result').catch(() => undefined);
    await expect.poll(async () => sampleValue(await scrape(h!.bridge), `${P}acl_refusals_total`, { action: 'subscribe' })).toBe(1);
  });

  it('keeps a registry per instance: two bridges in one process do not share counters', async () => {
    h = await startHarness();
    const other = await startHarness();
    try {
      const device = await h.device('cam-3');
      await device.publish('low', ask('only-here'));
      await device.reply('only-here');
      expect(sampleValue(await scrape(h.bridge), `${P}requests_total`, { priority: 'low', outcome: 'ok' })).toBe(1);
      expect(sampleValue(await scrape(other.bridge), `${P}requests_total`, { priority: 'low', outcome: 'ok' })).toBe(0);
    } finally {
      await other.close();
    }
  });

  it('rejects malformed exposition text (the parser is strict)', () => {
    expect(() => parsePrometheus('metric{a="b" 1\n')).toThrow();
    expect(() => parsePrometheus('metric one\n')).toThrow();
    expect(parsePrometheus('# HELP m h\n# TYPE m counter\nm{a="b",c="d"} 1.5e3\nm 2\n')).toEqual([
      { name: 'm', labels: { a: 'b', c: 'd' }, value: 1500 },
      { name: 'm', labels: {}, value: 2 },
    ]);
  });
});

describe('bridge/{instanceId}/metrics', () => {
  it('publishes a JSON snapshot every interval (not retained)', async () => {
    const b = await startBridgeWith({}, {}, { metricsIntervalMs: 200 });
    try {
      const device = await b.device('cam-4');
      await device.publish('critical', ask('s-1'));
      await device.reply('s-1');
      const received: Array<{ topic: string; retain: boolean; snapshot: MetricsSnapshot }> = [];
      await new Promise<void>((resolve) => {
        b.bridge.broker!.aedes.subscribe(
          'bridge/+/metrics',
          (packet, cb) => {
            received.push({
              topic: packet.topic,
              retain: packet.retain,
              snapshot: JSON.parse(packet.payload.toString()) as MetricsSnapshot,
            });
            cb();
          },
          resolve,
        );
      });
      await expect.poll(() => received.length, { timeout: 6000 }).toBeGreaterThanOrEqual(1);
      const first = received[0]!;
      expect(first.topic).toBe(topics.metrics(b.bridge.instanceId));
      expect(first.retain).toBe(false);
      expect(first.snapshot).toMatchObject({
        instance: b.bridge.instanceId,
        queueDepth: { critical: 0, high: 0, normal: 0, low: 0 },
        inFlight: 0,
        upstream: [{ provider: 'primary', circuit: 'closed', state: 0 }],
        connectedClients: 1,
      });
      expect(first.snapshot.rates).toMatchObject({ requestsPerS: expect.any(Number), byPriority: expect.any(Object) });
      // The request answered before the first interval shows as a rate.
      expect(first.snapshot.rates.byPriority.critical).toBeGreaterThan(0);
      expect(first.snapshot.rates.okPerS).toBeGreaterThan(0);
      await expect.poll(() => received.length, { timeout: 2000 }).toBeGreaterThanOrEqual(2);
      expect(received[1]!.snapshot.rates.requestsPerS).toBe(0);
    } finally {
      await b.close();
    }
  });
});
