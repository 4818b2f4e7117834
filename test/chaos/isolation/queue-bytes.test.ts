// Finding: queued images cost their base64 inside every job record, and QUEUE_MAX counted
// requests, not bytes. Cameras on one instance publish raw images while the upstream is slow:
// an image is stored once in Redis (by its hash), not inside each record, and goes with the
// last request holding it; QUEUE_MAX_BYTES, set
// low, refuses the images past it `queue_full` with retry_after_ms, and the count it keeps
// never goes over it and returns to 0 once they are answered. An innocent device on the other
// instance is answered ok meanwhile; /readyz stays 200.
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Reply } from '../../../contract/index.js';
import { startUpstreamSim, type UpstreamSim } from '../../../upstream-sim/sim.js';
import { ask, okOf, startHarness, type Device, type Harness } from '../../helpers/harness.js';
import { readyz } from '../../helpers/chaos.js';
import { connectRedis, deletePrefix, REDIS_URL, uniquePrefix } from '../../helpers/redis.js';
import { jpeg } from '../../helpers/images.js';
import { tempDir } from '../../helpers/security.js';
import { readUntil } from '../../helpers/wait.js';

const IMAGE_BYTES = 30_000;
const BASE64_BYTES = Math.ceil(IMAGE_BYTES / 3) * 4 + 8; // the JPEG markers add a few
const QUEUE_MAX_BYTES = Math.floor(3.5 * BASE64_BYTES); // three images and their records fit, a fourth does not
const dir = tempDir('eab-queue-bytes-');
const redis = connectRedis();
const prefix = uniquePrefix('queue-bytes');
let upstream: UpstreamSim;
let a: Harness;
let b: Harness;

/** A whole JPEG of IMAGE_BYTES: start and end markers around `fill`. */
const frame = (fill: number): Buffer => jpeg(fill, IMAGE_BYTES);

async function keys(pattern: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    found.push(...batch);
  } while (cursor !== '0');
  return found;
}

const qbytes = async (): Promise<number> => Number(await redis.get(`{${prefix}}:qbytes`));

/** Publishes one raw image of `device` and waits for the broker's PUBACK (a refusal's reason too). */
const publishImage = (device: Device, id: string, fill: number): Promise<unknown> =>
  device.client.publishAsync(`devices/${device.deviceId}/image/normal/check/${id}`, frame(fill), { qos: 1 }).catch(() => undefined);

beforeAll(async () => {
  const configFile = join(dir.path, 'config.json');
  writeFileSync(configFile, JSON.stringify({ templates: { check: { messages: [{ role: 'user', content: 'Any defect?' }] } } }));
  const env = { CONFIG_FILE: configFile, REDIS_URL, REDIS_PREFIX: prefix, QUEUE_MAX_BYTES: String(QUEUE_MAX_BYTES) };
  upstream = await startUpstreamSim({ port: 0, latencyMs: 1500 });
  a = await startHarness(env, {}, undefined, { upstream });
  b = await startHarness(env, {}, undefined, { upstream });
});

afterAll(async () => {
  await a.close();
  await b.close();
  await upstream.close();
  await deletePrefix(redis, prefix);
  redis.disconnect();
  dir.remove();
});

describe('isolation: queued requests are bounded in bytes, and an image is stored once', () => {
  it('keeps one copy of an image however many queued requests carry it, outside their records', async () => {
    const cam = await a.device('cam-once');
    await Promise.all(['o1', 'o2', 'o3'].map((id) => publishImage(cam, id, 7)));
    const stored = await keys(`{${prefix}}:img:*`);
    expect(stored).toHaveLength(1);
    expect(stored[0]).toContain(createHash('sha256').update(frame(7)).digest('hex'));
    expect(await redis.hstrlen(stored[0] as string, 'd')).toBe(frame(7).toString('base64').length);
    for (const id of ['o1', 'o2', 'o3']) {
      const record = `{${prefix}}:idem:cam-once/${id}`;
      expect(await redis.exists(record)).toBe(1); // still queued or in flight
      expect(await redis.memory('USAGE', record)).toBeLessThan(4096);
    }
    for (const id of ['o1', 'o2', 'o3']) okOf((await cam.reply(id, { timeoutMs: 15_000 }))[0]);
    // The upstream got the image itself, read back by hash when the request was claimed.
    const url = `data:image/jpeg;base64,${frame(7).toString('base64')}`;
    expect(upstream.requests.filter((r) => JSON.stringify(r.body).includes(url)).length).toBeGreaterThanOrEqual(1);
    // Answered: the records no longer count (the completion follows the reply).
    expect(await readUntil(qbytes, (bytes) => bytes === 0, 5000, 50)).toBe(0);
    expect(await keys(`{${prefix}}:img:*`)).toEqual([]); // gone with the last record holding it
  }, 60_000);

  it('refuses images past QUEUE_MAX_BYTES queue_full with retry_after_ms, and serves an innocent device', async () => {
    const cam = await a.device('cam-flood');
    const innocent = await b.device('innocent');
    const ids = Array.from({ length: 6 }, (_, i) => `f${i}`);
    await Promise.all(ids.map((id, i) => publishImage(cam, id, 20 + i)));
    expect(await qbytes()).toBeLessThanOrEqual(QUEUE_MAX_BYTES);
    const asked = Date.now();
    await innocent.publish('normal', ask('fine'));
    okOf((await innocent.reply('fine', { timeoutMs: 10_000 }))[0]);
    expect(Date.now() - asked).toBeLessThan(10_000);
    const replies = (await Promise.all(ids.map(async (id) => (await cam.reply(id, { timeoutMs: 15_000 }))[0]))) as Reply[];
    const full = replies.filter((r) => !r.ok && r.error.code === 'queue_full');
    expect(full.length).toBeGreaterThanOrEqual(3);
    for (const r of full) expect(!r.ok && r.error.retry_after_ms).toBeGreaterThan(0);
    expect(replies.filter((r) => r.ok).length).toBe(replies.length - full.length);
    for (const h of [a, b]) expect(await readyz(h.bridge.httpPort)).toBe(200);
  }, 60_000);
});
