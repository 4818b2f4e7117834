// The TypeScript client against a real bridge, over both broker modes and both MQTT versions:
// one connection carries 100 requests at once and every reply reaches its own caller.
import { writeFileSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { BridgeClient } from '../../client/index.js';
import { BROKER_MODES, startHarness, type Harness } from '../helpers/harness.js';
import { jpeg } from '../helpers/images.js';
import { tempDir } from '../helpers/security.js';
import { spyOn, type Spy } from './spy.js';

let h: Harness | undefined;
let client: BridgeClient | undefined;
let spy: Spy | undefined;
afterEach(async () => {
  await client?.close();
  await spy?.close();
  await h?.close();
  client = spy = h = undefined;
});

const dir = tempDir('eab-client-');
afterAll(() => dir.remove());
const CONFIG_FILE = `${dir.path}/templates.json`;
writeFileSync(
  CONFIG_FILE,
  JSON.stringify({
    templates: {
      inspect: { messages: [{ role: 'user', content: 'Inspect {{part}}' }] },
      'scratch-check': { messages: [{ role: 'user', content: 'Is there a scratch on part {{part}}?' }] },
      'any-defect': { messages: [{ role: 'user', content: 'Any defect?' }] },
    },
  }),
);

const OPEN_LIMITS = { DEVICE_RATE_LIMIT_RPM: '100000', RATE_LIMIT_RPM: '100000', MAX_CONCURRENCY: '200' };

describe.each(BROKER_MODES)('client on the %s broker', (mode) => {
  it.each([5, 4] as const)('MQTT %i: 100 requests in flight on one connection, each answered to its own caller, once', async (protocolVersion) => {
    h = await startHarness(OPEN_LIMITS, { latencyMs: 300 }, undefined, { mode });
    spy = await spyOn(h.url, 'cam-1');
    client = await BridgeClient.connect({ url: h.url, deviceId: 'cam-1', protocolVersion });
    expect(client.protocolVersion).toBe(protocolVersion);
    const replies = await Promise.all(
      Array.from({ length: 100 }, (_, i) => client!.chat({ messages: [{ role: 'user', content: `part ${i}` }] }, { priority: i % 2 ? 'high' : 'low' })),
    );
    replies.forEach((reply, i) => expect(reply.content).toBe(`sim answer to: part ${i}`));
    expect(new Set(replies.map((r) => r.id)).size).toBe(100);
    // All 100 were published before the first reply came: in flight together, on one connection.
    const firstReply = spy.seen.findIndex((s) => s.kind === 'reply');
    expect(spy.seen.slice(0, firstReply).filter((s) => s.kind === 'request')).toHaveLength(100);
    expect(spy.requests()).toHaveLength(100); // no attempt was repeated
    expect(h.upstream.requests).toHaveLength(100);
  });

  it("MQTT 5: replies come on the connection's own response topic, matched by correlation data", async () => {
    h = await startHarness(OPEN_LIMITS, { latencyMs: 5 }, undefined, { mode });
    client = await BridgeClient.connect({ url: h.url, deviceId: 'cam-2', clientId: 'cam-2.gateway' });
    expect(client.replyTopic).toBe('devices/cam-2/rpc/gateway');
    // Another connection of the same device asks too: each client gets only its own reply.
    const other = await BridgeClient.connect({ url: h.url, deviceId: 'cam-2', clientId: 'cam-2.panel' });
    const received: string[] = [];
    client.connection.on('message', (topic, _payload, packet) => received.push(`${topic} ${packet.properties?.correlationData?.toString() ?? ''}`));
    try {
      const [a, b] = await Promise.all([
        client.chat({ messages: [{ role: 'user', content: 'a' }] }),
        other.chat({ messages: [{ role: 'user', content: 'b' }] }),
      ]);
      expect([a.content, b.content]).toEqual(['sim answer to: a', 'sim answer to: b']);
      // One subscription: this connection received its own reply alone, on its topic, with its id as Correlation Data.
      expect(received).toEqual([`devices/cam-2/rpc/gateway ${a.id}`]);
    } finally {
      await other.close();
    }
  });

  it('sends templates, embeddings and batches through the same path; a batch keeps the outcome of each request', async () => {
    h = await startHarness({ ...OPEN_LIMITS, CONFIG_FILE }, { latencyMs: 5 }, undefined, { mode });
    client = await BridgeClient.connect({ url: h.url, deviceId: 'cam-3' });
    expect((await client.template('inspect', { part: 'gear 7' })).content).toBe('sim answer to: Inspect gear 7');
    const embedded = await client.embed(['belt', 'gear']);
    expect(embedded.embeddings).toHaveLength(2);
    const batch = await client.batch(
      [{ messages: [{ role: 'user', content: 'x' }] }, { input: 'y' }, { messages: [{ role: 'robot' as 'user', content: 'z' }] }],
      { concurrency: 2 },
    );
    expect(batch[0]).toMatchObject({ ok: true, content: 'sim answer to: x' });
    expect(batch[1]).toMatchObject({ ok: true });
    expect(batch[2]).toMatchObject({ name: 'BridgeRequestError', code: 'invalid_request' });
  });

  it.each([5, 4] as const)(
    'MQTT %i: sends a raw image, the template named in its topic (and its vars as user properties on MQTT 5)',
    async (protocolVersion) => {
      h = await startHarness({ ...OPEN_LIMITS, CONFIG_FILE }, { latencyMs: 5 }, undefined, { mode });
      client = await BridgeClient.connect({ url: h.url, deviceId: 'cam-4', protocolVersion });
      const reply =
        protocolVersion === 5
          ? await client.image(jpeg(1), { template: 'scratch-check', vars: { part: 'A7' }, priority: 'high' })
          : await client.image(jpeg(1), { template: 'any-defect', priority: 'high' });
      expect(reply).toMatchObject({
        ok: true,
        priority: 'high',
        content: `sim answer to: ${protocolVersion === 5 ? 'Is there a scratch on part A7?' : 'Any defect?'}`,
      });
      const body = h.upstream.requests[0]?.body as { messages: Array<{ content: Array<{ image_url?: { url: string } }> }> };
      expect(body.messages[0]?.content[1]?.image_url?.url).toBe(`data:image/jpeg;base64,${jpeg(1).toString('base64')}`);
      if (protocolVersion === 4) await expect(client.image(jpeg(2), { template: 'scratch-check', vars: { part: 'B' } })).rejects.toThrow(/needs MQTT 5/);
    },
  );
});
