// The fast fleet (device-sim/load.ts, behind `device-sim --workers` and `npm run bench`):
// devices on worker threads speaking raw MQTT frames, latencies in HDR histograms.
import { afterEach, describe, expect, it } from 'vitest';
import { startLoad, type LoadFleet } from '../../device-sim/load.js';
import { startHarness, type Harness } from '../helpers/harness.js';

let h: Harness | undefined;
let fleet: LoadFleet | undefined;

afterEach(async () => {
  await fleet?.close();
  await h?.close();
  fleet = undefined;
  h = undefined;
});

const MIX = { critical: 1, high: 9, normal: 80, low: 10 };

describe('the threaded load fleet', () => {
  it('counts what the bridge answered and the upstream received, by priority', async () => {
    h = await startHarness({ DEVICE_RATE_LIMIT_RPM: '100000', RATE_LIMIT_RPM: '100000' });
    fleet = await startLoad({ host: '127.0.0.1', ports: [h.bridge.mqttPort], devices: 20, workers: 2, mix: MIX, prefix: 'lf' });
    expect(h.bridge.broker!.aedes.connectedClients).toBe(20);

    const step = await fleet.step(200, 1, 5000);

    expect(step.sent).toBeGreaterThanOrEqual(190);
    expect(step.ok).toBe(step.sent);
    expect(step.lost).toBe(0);
    expect(step.duplicates).toBe(0);
    // Every text is distinct, so every request reached the upstream once.
    expect(h.upstream.stats().byPath['/v1/chat/completions']).toBe(step.sent);
    const answered = Object.values(step.byPriority).reduce((n, p) => n + p.answered, 0);
    expect(answered).toBe(step.sent);
    expect(step.byPriority.normal.answered).toBeGreaterThan(step.byPriority.high.answered);
    // The harness upstream answers in 5 ms: no reply can come faster.
    expect(step.latencyMs.p50).toBeGreaterThanOrEqual(5);
  });

  it('reconnects devices the broker dropped before the next step, and counts the drops', async () => {
    h = await startHarness({ DEVICE_RATE_LIMIT_RPM: '100000', RATE_LIMIT_RPM: '100000' });
    fleet = await startLoad({ host: '127.0.0.1', ports: [h.bridge.mqttPort], devices: 4, workers: 1, mix: MIX, prefix: 'lf2' });
    const { clients } = h.bridge.broker!.aedes as unknown as { clients: Record<string, { close(): void }> };
    for (const client of Object.values(clients)) client.close();
    await new Promise((resolve) => setTimeout(resolve, 200));

    const step = await fleet.step(100, 0.5, 2000);

    expect(step.sent).toBeGreaterThanOrEqual(45);
    expect(step.ok).toBe(step.sent);
    expect(h.bridge.broker!.aedes.connectedClients).toBe(4);
    expect(step.disconnects).toBe(4);
    expect(step.firstDisconnect).toMatch(/^lf2-\d+: connection closed by the broker$/);
  });
});
