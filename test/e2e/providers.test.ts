// The provider chain end to end: devices over MQTT, a real bridge, a primary and a fallback
// upstream simulator, FALLBACK_* / BREAKER_COOLDOWN_MS / CONFIG_FILE from the environment,
// and (last test) two instances sharing the primary's circuit through Redis.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Reply } from '../../contract/index.js';
import { startUpstreamSim, type UpstreamSim } from '../../upstream-sim/sim.js';
import { startFleet, type Fleet } from '../helpers/fleet.js';
import { closedPortUrl } from '../helpers/provider-chain.js';
import { ask, sleep, startHarness, type Device, type Harness } from '../helpers/harness.js';

const dir = mkdtempSync(join(tmpdir(), 'providers-e2e-'));
let fileSeq = 0;
function configFile(content: unknown): string {
  fileSeq += 1;
  const path = join(dir, `config-${fileSeq}.json`);
  writeFileSync(path, JSON.stringify(content));
  return path;
}

/** Opens the circuit after two failures in a row. */
const BREAKER = { breaker: { consecutiveFailures: 2, errorRate: 1, windowMs: 30_000, minCalls: 100 } };

function okReply(reply: Reply | undefined): Extract<Reply, { ok: true }> {
  if (!reply?.ok) throw new Error(`expected an ok reply, got ${JSON.stringify(reply)}`);
  return reply;
}

async function askOne(device: Device, id: string, priority = 'normal'): Promise<Extract<Reply, { ok: true }>> {
  await device.publish(priority, ask(id));
  const [reply] = await device.reply(id, { timeoutMs: 5000 });
  return okReply(reply);
}

let harness: Harness | undefined;
let fleet: Fleet | undefined;
const sims: UpstreamSim[] = [];

afterEach(async () => {
  await harness?.close();
  harness = undefined;
  await fleet?.close();
  fleet = undefined;
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function fallbackSim(): Promise<UpstreamSim> {
  const s = await startUpstreamSim({ port: 0, latencyMs: 5 });
  sims.push(s);
  return s;
}

describe('provider chain (device ↔ bridge ↔ primary / fallback simulators)', () => {
  it('answers from the fallback with its model while the primary refuses connections; the circuit then skips the primary', async () => {
    const fallback = await fallbackSim();
    harness = await startHarness(
      {
        UPSTREAM_URL: await closedPortUrl(),
        FALLBACK_URL: fallback.url,
        FALLBACK_MODEL: 'fallback-model',
        BREAKER_COOLDOWN_MS: '60000',
        CONFIG_FILE: configFile(BREAKER),
      },
      {},
      undefined,
      { upstream: fallback },
    );
    const device = await harness.device('cam-refused');
    const replies = [];
    for (let i = 1; i <= 5; i += 1) replies.push(await askOne(device, `r-${i}`));
    for (const r of replies) expect(r).toMatchObject({ model: 'fallback-model', content: expect.stringMatching(/^sim answer to: question r-/) });
    // Two requests paid a refused attempt on the primary (and opened its circuit); the rest went straight to the fallback.
    expect(replies.map((r) => r.attempts)).toEqual([2, 2, 1, 1, 1]);
    expect(fallback.requests).toHaveLength(5);
    expect(fallback.stats().byModel).toEqual({ 'fallback-model': 5 });
  });

  it('answers from the fallback while the primary answers 500, and routes priorities by CONFIG_FILE', async () => {
    const fallback = await fallbackSim();
    const cooldownMs = 800;
    harness = await startHarness(
      {
        FALLBACK_URL: fallback.url,
        FALLBACK_MODEL: 'fallback-model',
        BREAKER_COOLDOWN_MS: String(cooldownMs),
        CONFIG_FILE: configFile({ ...BREAKER, routing: { low: { model: 'cheap-model' } } }),
      },
      { errorRate: 1 },
    );
    const primary = harness.upstream;
    const device = await harness.device('cam-500');
    expect(await askOne(device, 'a-1')).toMatchObject({ model: 'fallback-model', attempts: 2 });
    expect(await askOne(device, 'a-2')).toMatchObject({ model: 'fallback-model', attempts: 2 });
    expect(await askOne(device, 'a-3')).toMatchObject({ model: 'fallback-model', attempts: 1 });
    expect(primary.requests).toHaveLength(2);
    expect(primary.stats().byStatus).toEqual({ '500': 2 });

    // The primary recovers; after the cool-down one probe closes its circuit.
    primary.setOptions({ errorRate: 0 });
    await sleep(cooldownMs + 100); // the cool-down, from the circuit's opening before a-3
    expect(await askOne(device, 'b-critical', 'critical')).toMatchObject({ model: 'gpt-4o-mini', attempts: 1 });
    // Routing: low goes to the cheaper model, critical keeps the primary model.
    expect(await askOne(device, 'b-low', 'low')).toMatchObject({ model: 'cheap-model', attempts: 1 });
    expect(await askOne(device, 'b-critical-2', 'critical')).toMatchObject({ model: 'gpt-4o-mini', attempts: 1 });
    expect(primary.stats().byModel).toEqual({ 'gpt-4o-mini': 4, 'cheap-model': 1 });
    expect(fallback.requests).toHaveLength(3);
  });

  it('shares the circuit through Redis: once instance 1 opened it, instance 2 sends nothing to the primary during the cool-down', async () => {
    const fallback = await fallbackSim();
    const cooldownMs = 2500;
    fleet = await startFleet(
      0,
      {
        FALLBACK_URL: fallback.url,
        FALLBACK_MODEL: 'fallback-model',
        BREAKER_COOLDOWN_MS: String(cooldownMs),
        CONFIG_FILE: configFile(BREAKER),
      },
      { errorRate: 1 },
    );
    const primary = fleet.upstream;
    const one = await fleet.add();
    const two = await fleet.add();
    const d1 = await one.device('cam-one');
    const d2 = await two.device('cam-two');

    // Instance 1 meets the failing primary twice: the shared circuit opens.
    expect(await askOne(d1, 'one-1')).toMatchObject({ model: 'fallback-model', attempts: 2 });
    expect(await askOne(d1, 'one-2')).toMatchObject({ model: 'fallback-model', attempts: 2 });
    const openedAt = Date.now();
    expect(primary.requests).toHaveLength(2);

    // Instance 2 has never called the primary itself, yet skips it (even though it is healthy again).
    primary.setOptions({ errorRate: 0 });
    for (let i = 1; i <= 5; i += 1) expect(await askOne(d2, `two-${i}`)).toMatchObject({ model: 'fallback-model', attempts: 1 });
    expect(Date.now() - openedAt).toBeLessThan(cooldownMs);
    expect(primary.requests).toHaveLength(2);

    // After the cool-down instance 2's probe closes the circuit for both.
    await sleep(cooldownMs - (Date.now() - openedAt) + 100);
    expect(await askOne(d2, 'two-probe')).toMatchObject({ model: 'gpt-4o-mini', attempts: 1 });
    expect(await askOne(d1, 'one-back')).toMatchObject({ model: 'gpt-4o-mini', attempts: 1 });
    expect(primary.requests).toHaveLength(4);
    expect(primary.stats().byStatus).toEqual({ '500': 2, '200': 2 });
  });
});
