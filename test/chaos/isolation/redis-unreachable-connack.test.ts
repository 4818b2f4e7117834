// Finding: a client that connected while Redis was unreachable got no CONNACK and was dropped
// after some seconds (its CONNECT waited for the sessions kept in Redis). Now, while the store
// knows Redis is out of reach (a closed connection at once, a stalled one after
// REDIS_TIMEOUT_MS), a CONNECT is refused at once: CONNACK server unavailable (3 on MQTT
// 3.1.1, 0x88 on MQTT 5), and a client that retries connects once Redis is back.
import mqtt, { type IClientOptions } from 'mqtt';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ask, okOf, startHarness, type Harness } from '../../helpers/harness.js';
import { readyz } from '../../helpers/chaos.js';
import { connectRedis, deletePrefix, REDIS_URL, uniquePrefix } from '../../helpers/redis.js';
import { startTcpProxy, type TcpProxy } from '../../helpers/tcp-proxy.js';
import { readUntil } from '../../helpers/wait.js';

const REDIS_TIMEOUT_MS = 1000;
/** The finding's bound: a refusal comes at once, not after a timeout (generous for a loaded machine). */
const CONNACK_WITHIN_MS = 2000;
const redis = connectRedis();
let h: Harness | undefined;
let proxy: TcpProxy | undefined;
let prefix = '';

afterEach(async () => {
  await proxy?.heal();
  await h?.close();
  await proxy?.close();
  if (prefix) await deletePrefix(redis, prefix);
  h = proxy = undefined;
});
afterAll(() => redis.disconnect());

async function startOnProxy(): Promise<Harness> {
  const target = new URL(REDIS_URL);
  proxy = await startTcpProxy(Number(target.port || 6379), target.hostname);
  prefix = uniquePrefix('connack');
  h = await startHarness({ REDIS_URL: proxy.url, REDIS_PREFIX: prefix, REDIS_TIMEOUT_MS: String(REDIS_TIMEOUT_MS) });
  return h;
}

/** The CONNACK code a fresh client gets (0 = connected), and how long it took; undefined: none within 8 s. */
async function connackOf(harness: Harness, clientId: string, protocolVersion: 4 | 5): Promise<{ code: number | undefined; ms: number }> {
  const started = performance.now();
  const options: IClientOptions = { clientId, protocolVersion, reconnectPeriod: 0, connectTimeout: 8000 };
  const client = mqtt.connect(`mqtt://127.0.0.1:${harness.bridge.mqttPort}`, options);
  const code = await new Promise<number | undefined>((resolve) => {
    client.once('connect', () => resolve(0));
    client.once('error', (err) => resolve((err as { code?: number }).code));
    client.once('close', () => resolve(undefined));
  });
  client.end(true);
  return { code, ms: performance.now() - started };
}

/** Polls /readyz until it answers `status` (true) or 15 s pass (false). */
async function readyzBecomes(harness: Harness, status: number): Promise<boolean> {
  const read = (): Promise<number> => readyz(harness.bridge.httpPort);
  return (await readUntil(read, (s) => s === status, 15_000, 50)) === status;
}

async function answeredOk(harness: Harness, deviceId: string, id: string): Promise<void> {
  const device = await harness.device(deviceId);
  await device.publish('normal', ask(id));
  const [reply] = await device.reply(id, { timeoutMs: 10_000 });
  expect(okOf(reply).id).toBe(id);
}

describe('isolation: a CONNECT while Redis is unreachable gets CONNACK server unavailable at once', () => {
  for (const cut of ['partition', 'stall'] as const) {
    it(
      `Redis ${cut === 'partition' ? 'refusing connections' : 'stalled (connections open, nothing answered)'}: CONNACK 3 / 0x88 within ${CONNACK_WITHIN_MS} ms; clients connect again once it is back`,
      { timeout: 60_000 },
      async () => {
        const harness = await startOnProxy();
        await answeredOk(harness, 'cam-before', 'before-1');
        if (cut === 'partition') await proxy!.partition();
        else proxy!.stall();
        // The bridge knows: unready (a closed connection at once, silence after REDIS_TIMEOUT_MS).
        expect(await readyzBecomes(harness, 503)).toBe(true);

        const v4 = await connackOf(harness, 'cam-late4', 4);
        const v5 = await connackOf(harness, 'cam-late5', 5);
        expect(v4.code).toBe(3);
        expect(v5.code).toBe(0x88);
        expect(Math.max(v4.ms, v5.ms)).toBeLessThan(CONNACK_WITHIN_MS);

        await proxy!.heal();
        expect(await readyzBecomes(harness, 200)).toBe(true);
        expect((await connackOf(harness, 'cam-after', 4)).code).toBe(0);
        await answeredOk(harness, 'cam-after', 'after-1');
      },
    );
  }
});
