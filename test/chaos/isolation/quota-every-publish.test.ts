// Finding: invalid requests and duplicates bypassed the device quota. An attacker device floods
// bad JSON and duplicates of an answered request through one instance, then more through a
// second instance sharing the Redis: every publish counts against DEVICE_RATE_LIMIT_RPM (in
// the shared window), so it gets at most the quota's replies plus one rate_limited reply a
// second, and the bridge logs a bounded number of lines about it. An innocent device on the
// other instance is answered ok; /readyz stays 200.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBridge, type RunningBridge } from '../../../bridge/app.js';
import { loadConfig } from '../../../bridge/config/config.js';
import { createLogger } from '../../../bridge/logger.js';
import { startUpstreamSim, type UpstreamSim } from '../../../upstream-sim/sim.js';
import { ask, connectDevice, okOf, type Device } from '../../helpers/harness.js';
import { readyz, waitUntil } from '../../helpers/chaos.js';
import { connectRedis, deletePrefix, REDIS_URL, uniquePrefix } from '../../helpers/redis.js';

const RPM = 20;
const FLOOD = 300;

/** Log lines of both instances, as JSON. */
const lines: Array<Record<string, unknown>> = [];
const sink = new Writable({
  write(chunk: Buffer, _encoding, done) {
    for (const line of chunk.toString().split('\n')) if (line.trim()) lines.push(JSON.parse(line) as Record<string, unknown>);
    done();
  },
});

const redis = connectRedis();
const prefix = uniquePrefix('quota-every-publish');
let upstream: UpstreamSim;
const bridges: RunningBridge[] = [];
const devices: Device[] = [];

async function instance(): Promise<RunningBridge> {
  const env = {
    MQTT_PORT: '0',
    HTTP_PORT: '0',
    LOG_LEVEL: 'info',
    OVERLOAD_DELAY_MS: '0',
    REDIS_URL,
    REDIS_PREFIX: prefix,
    DEVICE_RATE_LIMIT_RPM: String(RPM),
  };
  const config = loadConfig(env);
  const bridge = await startBridge({ ...config, upstreamUrl: upstream.url }, createLogger('info', sink));
  bridges.push(bridge);
  return bridge;
}

async function device(bridge: RunningBridge, clientId: string): Promise<Device> {
  const d = await connectDevice(`mqtt://127.0.0.1:${bridge.mqttPort}`, clientId);
  devices.push(d);
  return d;
}

/** Waits until the device has had no new reply for `quietMs` (replies leave without being awaited). */
async function settled(d: Device, quietMs = 700): Promise<void> {
  let count = -1;
  let since = Date.now();
  await waitUntil(() => {
    if (d.replies.length !== count) [count, since] = [d.replies.length, Date.now()];
    return Date.now() - since >= quietMs;
  }, 15_000);
}

beforeAll(async () => {
  upstream = await startUpstreamSim({ port: 0, latencyMs: 5 });
  await instance();
  await instance();
});

afterAll(async () => {
  await Promise.all(devices.map((d) => d.close()));
  for (const bridge of bridges) await bridge.shutdown();
  await upstream.close();
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

describe('isolation: every publish counts against the device quota', () => {
  it('bounds the replies and log lines an attacker flooding bad JSON and duplicates gets, across instances', async () => {
    const [a, b] = bridges as [RunningBridge, RunningBridge];
    const attacker = await device(a, 'attacker');
    const started = Date.now();
    await attacker.publish('normal', ask('answered'));
    okOf((await attacker.reply('answered'))[0]);
    // Bad JSON and duplicates of the answered request, every PUBACK awaited.
    await Promise.all(Array.from({ length: FLOOD }, (_, i) => attacker.publish('normal', i % 2 === 0 ? '{"id":"bad", nope' : ask('answered'))));
    // The same device through the other instance: the shared window has no room left either.
    const again = await device(b, 'attacker.2');
    await Promise.all(Array.from({ length: 50 }, () => again.publish('normal', '{"id":"bad2" nope')));
    await settled(attacker);
    const seconds = (Date.now() - started) / 1000;

    // The quota's replies (invalid_request, the stored reply again), then at most one
    // rate_limited reply a second per instance.
    const limited = attacker.replies.filter((r) => !r.ok && r.error.code === 'rate_limited');
    expect(attacker.replies.length - limited.length).toBeLessThanOrEqual(RPM);
    expect(limited.length).toBeGreaterThan(0);
    expect(limited.length).toBeLessThanOrEqual(2 * (Math.ceil(seconds) + 1));
    expect(limited[0]?.ok === false && limited[0].error.retry_after_ms).toBeGreaterThan(0);
    // One upstream call: the duplicates were answered from the store.
    expect(upstream.requests.length).toBe(1);
    // Logs: a line per counted refusal at most, and a summary per device and interval.
    const about = lines.filter((l) => l.deviceId === 'attacker');
    expect(about.length).toBeLessThanOrEqual(RPM + 2 * (Math.ceil(seconds / 10) + 2));
    expect(lines.some((l) => typeof l.msg === 'string' && /attacker is over DEVICE_RATE_LIMIT_RPM/.test(l.msg))).toBe(true);

    // An innocent device on the other instance is served at once.
    const innocent = await device(b, 'innocent');
    const asked = Date.now();
    await innocent.publish('normal', ask('fine'));
    okOf((await innocent.reply('fine', { timeoutMs: 5000 }))[0]);
    expect(Date.now() - asked).toBeLessThan(5000);
    for (const bridge of bridges) expect(await readyz(bridge.httpPort)).toBe(200);
  });
});
