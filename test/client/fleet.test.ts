// device-sim's `--client` devices (the demo's): the fleet's requests go through
// edge-ai-bridge/client, and the report counts what the devices received.
import { afterEach, describe, expect, it } from 'vitest';
import { parseFleetArgs, runFleet } from '../../device-sim/fleet.js';
import { formatReport } from '../../device-sim/summary.js';
import { startHarness, type Harness } from '../helpers/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('device-sim --client', () => {
  it('runs a streamed MQTT 5 fleet through the client: every request answered, first chunks timed', async () => {
    h = await startHarness({ DEVICE_RATE_LIMIT_RPM: '100000', RATE_LIMIT_RPM: '100000' }, { latencyMs: 20, streamChunkMs: 2 });
    const opts = parseFleetArgs([
      '--url',
      h.url,
      '--devices',
      '4',
      '--rate',
      '40',
      '--duration',
      '1',
      '--client',
      '--mqtt5',
      '--stream',
      '--reply-timeout',
      '10',
    ]);
    const report = await runFleet(opts);
    expect(report.overall).toMatchObject({ sent: 40, ok: 40, lost: 0 });
    expect(report.overall.firstChunkMs?.p50).toBeGreaterThan(0);
    expect(formatReport(report)).toContain('edge-ai-bridge/client');
    expect(h.upstream.requests).toHaveLength(40);
  });

  it('counts what the bridge answered as the raw devices do: a quota refusal is not retried', async () => {
    h = await startHarness({ DEVICE_RATE_LIMIT_RPM: '5', RATE_LIMIT_RPM: '100000' }, { latencyMs: 5 });
    const run = (client: string[], prefix: string) =>
      runFleet(parseFleetArgs(['--url', h!.url, '--devices', '1', '--rate', '10', '--duration', '1', '--prefix', prefix, '--reply-timeout', '3', ...client]));
    const [raw, viaClient] = await Promise.all([run([], 'raw'), run(['--client'], 'cli')]);
    expect(viaClient.overall).toMatchObject({ sent: 10, ok: 5 });
    expect(viaClient.overall.errors.rate_limited).toBeGreaterThan(0);
    // The bridge answers a device's refusals only so often (a flood is not echoed): the rest are lost alike.
    expect(viaClient.overall).toEqual({ ...raw.overall, latencyMs: viaClient.overall.latencyMs, achievedRate: viaClient.overall.achievedRate });
    expect(h.upstream.requests).toHaveLength(10);
  });

  it('refuses --client with --workers (the fast fleet writes raw frames)', () => {
    expect(() => parseFleetArgs(['--workers', '2', '--client'])).toThrow('--client needs --workers 0');
  });
});
