// Raw camera images: a camera publishes the JPEG's bytes themselves and names the template that
// asks about them; the upstream receives the image as a data URL in the template's user message.
// MQTT 3.1.1 names everything in the topic, MQTT 5 may use user properties. Asserted on what the
// camera got and what the upstream saw.
import { mkdirSync, writeFileSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Reply } from '../../contract/index.js';
import { parseFleetArgs, runFleet } from '../../device-sim/fleet.js';
import { BROKER_MODES, okOf, startHarness, type Harness } from '../helpers/harness.js';
import { jpeg } from '../helpers/images.js';
import { tempDir } from '../helpers/security.js';
import { http } from '../helpers/admin-http.js';
import type { Redis } from 'ioredis';
import { redisKeys } from '../../bridge/store/redis-keys.js';
import { startFleet, type Fleet } from '../helpers/fleet.js';
import { connectRedis } from '../helpers/redis.js';
import { readUntil } from '../helpers/wait.js';

const dir = tempDir('eab-images-');
afterAll(() => dir.remove());

const CONFIG = `${dir.path}/config.json`;
writeFileSync(
  CONFIG,
  JSON.stringify({
    templates: {
      'scratch-check': { messages: [{ role: 'user', content: 'Is there a scratch on part {{part}}?' }], image_detail: 'high' },
      'any-defect': { messages: [{ role: 'user', content: 'Any defect?' }] },
    },
  }),
);

type Body = { messages: Array<{ role: string; content: Array<{ type: string; text?: string; image_url?: { url: string; detail: string } }> }> };

let h: Harness | undefined;
let fleet: Fleet | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
  await fleet?.close();
  fleet = undefined;
});

describe.each(BROKER_MODES)('raw camera images (%s broker)', (mode) => {
  it('answers a JPEG published raw by an MQTT 3.1.1 camera (all in the topic) and by an MQTT 5 one (user properties)', async () => {
    h = await startHarness({ CONFIG_FILE: CONFIG }, {}, undefined, { mode });
    const v3 = await h.device('cam-1');
    await v3.client.publishAsync('devices/cam-1/image/high/any-defect/f1', jpeg(1), { qos: 1 });
    expect(okOf((await v3.reply('f1'))[0]).content).toBe('sim answer to: Any defect?');
    const first = h.upstream.requests[0]?.body as Body;
    expect(first.messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Any defect?' },
          { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${jpeg(1).toString('base64')}`, detail: 'low' } },
        ],
      },
    ]);

    const v5 = await h.device('cam-2', { protocolVersion: 5 });
    await v5.client.publishAsync('devices/cam-2/image/normal', jpeg(2), {
      qos: 1,
      properties: { contentType: 'image/jpeg', userProperties: { template: 'scratch-check', id: 'f2', 'var.part': 'A7' } },
    });
    expect(okOf((await v5.reply('f2'))[0]).content).toBe('sim answer to: Is there a scratch on part A7?');
    const second = h.upstream.requests[1]?.body as Body;
    expect(second.messages[0]?.content[1]).toEqual({
      type: 'image_url',
      image_url: { url: `data:image/jpeg;base64,${jpeg(2).toString('base64')}`, detail: 'high' },
    });
  });

  it('refuses a payload that only starts like a JPEG, an unknown template and an image over IMAGE_MAX_BYTES, while the camera beside is served', async () => {
    h = await startHarness({ CONFIG_FILE: CONFIG, IMAGE_MAX_BYTES: '10000' }, {}, undefined, { mode });
    const bad = await h.device('cam-3');
    const good = await h.device('cam-4');
    await bad.client.publishAsync('devices/cam-3/image/normal/any-defect/t1', jpeg(3).subarray(0, 500), { qos: 1 });
    await bad.client.publishAsync('devices/cam-3/image/normal/nope/t2', jpeg(3), { qos: 1 });
    await bad.client.publishAsync('devices/cam-3/image/normal/any-defect/t3', jpeg(3, 20_000), { qos: 1 });
    await good.client.publishAsync('devices/cam-4/image/normal/any-defect/ok1', jpeg(4), { qos: 1 });
    const errorOf = (r: Reply | undefined) => (r && !r.ok ? r.error : undefined);
    expect(errorOf((await bad.reply('t1'))[0])).toMatchObject({ code: 'invalid_request', message: 'JPEG is truncated: no end-of-image marker' });
    expect(errorOf((await bad.reply('t2'))[0])).toMatchObject({ code: 'invalid_request', message: 'unknown template "nope"' });
    expect(errorOf((await bad.reply('t3'))[0])).toMatchObject({ code: 'payload_too_large', message: 'image is 20006 bytes, over IMAGE_MAX_BYTES (10000)' });
    expect(okOf((await good.reply('ok1'))[0]).ok).toBe(true);
    expect(h.upstream.requests).toHaveLength(1);
    expect(bad.client.connected).toBe(true);
  });

  it('answers an image on a topic it cannot read with what is wrong, never silence', async () => {
    h = await startHarness({ CONFIG_FILE: CONFIG }, {}, undefined, { mode });
    const cam = await h.device('cam-5');
    await cam.client.publishAsync('devices/cam-5/image/urgent/any-defect/p1', jpeg(5), { qos: 1 });
    await cam.client.publishAsync('devices/cam-5/image/high/any-defect/p2/extra', jpeg(5), { qos: 1 });
    await cam.client.publishAsync('devices/cam-5/image/high/any-defect/bad id', jpeg(5), { qos: 1 });
    await cam.client.publishAsync('devices/cam-5/image/high/any-defect', jpeg(5), { qos: 1 });
    const errorOf = (r: Reply | undefined) => (r && !r.ok ? r.error : undefined);
    expect(errorOf((await cam.reply('p1'))[0])).toMatchObject({
      code: 'invalid_request',
      message: 'unknown priority "urgent" (expected critical, high, normal or low)',
    });
    const shape =
      'an image topic is devices/{id}/image/{priority}/{template}/{requestId}, or devices/{id}/image/{priority} with the MQTT 5 user properties template and id';
    expect(errorOf((await cam.reply('p2'))[0])).toMatchObject({ code: 'invalid_request', message: shape });
    const unnamed = await cam.reply(null, { count: 2 });
    expect(unnamed.map(errorOf)).toEqual([
      expect.objectContaining({ code: 'invalid_request', message: 'id: must be 1 to 64 characters of A-Za-z0-9._:-' }),
      expect.objectContaining({ code: 'invalid_request', message: shape }),
    ]);
    expect(h.upstream.requests).toHaveLength(0);
    expect(cam.client.connected).toBe(true);
  });
});

describe('raw camera images: cache and dead letters', () => {
  it('answers the same image again from the cache (keyed on its hash); a dead letter keeps its hash and size, never its bytes', async () => {
    h = await startHarness({ CONFIG_FILE: CONFIG, MAX_ATTEMPTS: '1', ADMIN_TOKEN: 'images-admin-token-0123456789' });
    const cam = await h.device('cam-5');
    await cam.client.publishAsync('devices/cam-5/image/normal/any-defect/c1', jpeg(5), { qos: 1 });
    await cam.client.publishAsync('devices/cam-5/image/normal/any-defect/c2', jpeg(5), { qos: 1 });
    await cam.reply('c1');
    expect(okOf((await cam.reply('c2'))[0]).cached).toBe(true);
    expect(h.upstream.requests).toHaveLength(1);

    h.upstream.script({ status: 500 });
    await cam.client.publishAsync('devices/cam-5/image/normal/any-defect/d1', jpeg(6), { qos: 1 });
    expect((await cam.reply('d1'))[0]).toMatchObject({ ok: false, error: { code: 'upstream_error' } });
    const [letter] = (await h.bridge.store.operations.deadLetters.page(10, undefined, Date.now())).entries;
    expect(letter?.job.image).toEqual({ mime: 'image/jpeg', sha256: expect.stringMatching(/^[0-9a-f]{64}$/), bytes: 2006 });
    expect(JSON.stringify(letter)).not.toContain(jpeg(6).toString('base64').slice(0, 40));
    // Replayed, it cannot be asked again without its bytes: the camera is told to publish it again.
    expect((await http(h.bridge, '/v1/dlq/replay', { method: 'POST', token: 'images-admin-token-0123456789' })).json).toEqual({ replayed: 1 });
    expect((await cam.reply('d1', { count: 2 }))[1]).toMatchObject({
      ok: false,
      error: { code: 'invalid_request', message: 'the image of this request was not kept (a replayed dead letter): publish it again' },
    });
    expect(h.upstream.requests).toHaveLength(2);
  });

  it('refuses an MQTT 5 image whose Content Type does not match its bytes', async () => {
    h = await startHarness({ CONFIG_FILE: CONFIG });
    const cam = await h.device('cam-6', { protocolVersion: 5 });
    const published = cam.client.publishAsync('devices/cam-6/image/low/any-defect/m1', jpeg(7), { qos: 1, properties: { contentType: 'image/png' } });
    await expect(published).rejects.toMatchObject({ code: 0x99 }); // PUBACK: Payload format invalid
    expect((await cam.reply('m1'))[0]).toMatchObject({ ok: false, error: { message: 'Content Type image/png does not match the image (image/jpeg)' } });
  });
});

describe('raw camera images on Redis', () => {
  it('answers an image through instances sharing Redis; once it is answered, no key of the deployment holds its bytes', async () => {
    fleet = await startFleet(2, { CONFIG_FILE: CONFIG });
    const cam = await (fleet.instances[0] as Harness).device('cam-9');
    const frame = jpeg(9, 50_000);
    await cam.client.publishAsync('devices/cam-9/image/high/any-defect/r1', frame, { qos: 1 });
    expect(okOf((await cam.reply('r1'))[0]).ok).toBe(true);
    const base64 = frame.toString('base64');
    expect((fleet.upstream.requests[0]?.body as Body).messages[0]?.content[1]?.image_url?.url).toBe(`data:image/jpeg;base64,${base64}`);
    // The reply is published just before the job's record becomes the answer: give it a moment.
    const redis = connectRedis();
    try {
      const holding = async (): Promise<string[]> => {
        const held = await valuesUnder(redis, redisKeys(fleet?.prefix ?? '').pattern);
        expect(held.size).toBeGreaterThan(0); // the reply's idempotency record at least
        return [...held].filter(([, value]) => value.includes(base64.slice(1000, 1100))).map(([key]) => key);
      };
      expect(await readUntil(holding, (keys) => keys.length === 0, 2000, 50)).toEqual([]);
    } finally {
      redis.disconnect();
    }
  });
});

/** Every key matching `pattern`, with its whole value as text (strings, hashes, lists, sets, sorted sets). */
async function valuesUnder(redis: Redis, pattern: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for await (const keys of redis.scanStream({ match: pattern, count: 1000 })) {
    for (const key of keys as string[]) out.set(key, JSON.stringify(await valueOf(redis, key)));
  }
  return out;
}

/** One key's value; a job record turns from a hash into a string when answered, so a read that meets the new type reads again. */
async function valueOf(redis: Redis, key: string): Promise<unknown> {
  for (let attempt = 0; ; attempt += 1) {
    const type = await redis.type(key);
    const read: Record<string, () => Promise<unknown>> = {
      string: () => redis.get(key),
      hash: () => redis.hgetall(key),
      list: () => redis.lrange(key, 0, -1),
      set: () => redis.smembers(key),
      zset: () => redis.zrange(key, '0', '-1'),
    };
    try {
      return (await read[type]?.()) ?? null;
    } catch (error) {
      if (attempt >= 3 || !String(error).includes('WRONGTYPE')) throw error;
    }
  }
}

describe('device-sim image mode', () => {
  it('sends a folder of images in turn at a rate, each answered, each reaching the upstream as its data URL', async () => {
    h = await startHarness({ CONFIG_FILE: CONFIG });
    const folder = `${dir.path}/frames`;
    mkdirSync(folder, { recursive: true });
    writeFileSync(`${folder}/a.jpg`, jpeg(8));
    writeFileSync(`${folder}/b.jpg`, jpeg(9));
    writeFileSync(`${folder}/notes.txt`, 'not a frame');
    const args = parseFleetArgs([
      '--url',
      h.url,
      '--devices',
      '2',
      '--rate',
      '20',
      '--duration',
      '0.5',
      '--images',
      folder,
      '--template',
      'any-defect',
      '--reply-timeout',
      '5',
    ]);
    const report = await runFleet(args);
    expect(report.overall).toMatchObject({ sent: 10, ok: 10, lost: 0, errors: {} });
    const urls = new Set(h.upstream.requests.map((r) => (r.body as Body).messages[0]?.content[1]?.image_url?.url));
    // Identical frames are answered from the cache: the upstream saw each of the two once.
    expect(urls).toEqual(new Set([jpeg(8), jpeg(9)].map((f) => `data:image/jpeg;base64,${f.toString('base64')}`)));
  });

  it('refuses --images without --template, and an empty folder, by name', () => {
    expect(() => parseFleetArgs(['--images', 'generated'])).toThrow(/--images: needs --template/);
    expect(() => parseFleetArgs(['--images', dir.path, '--template', 'x'])).toThrow(/--images: no .jpg/);
  });
});
