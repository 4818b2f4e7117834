import mqtt from 'mqtt';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { barrier, callsBeforeBarrier } from '../helpers/barrier.js';
import { ask, startHarness, subscribeGranted, type Harness } from '../helpers/harness.js';
import { eventually } from '../helpers/wait.js';

describe('topic access for anonymous devices', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await startHarness();
  });
  afterEach(async () => {
    await h.close();
  });

  it("drops device A's publish on B's request topic and disconnects A; nothing reaches the bridge or upstream", async () => {
    const b = await h.device('cam-b');
    const a = await mqtt.connectAsync(h.url, { clientId: 'cam-a', reconnectPeriod: 0 });
    const closed = new Promise<void>((resolve) => a.once('close', () => resolve()));
    a.publish('devices/cam-b/infer/high', JSON.stringify(ask('forged')), { qos: 1 });
    await closed;
    // A barrier: B's own request on that topic, which the forged one would have come before.
    await barrier(b, 'high');
    expect(b.replies.map((r) => r.id)).toEqual(['barrier']);
    expect(callsBeforeBarrier(h.upstream)).toEqual([]);
    a.end(true);
  });

  it("refuses A's subscription to B's result topic (granted 128) and grants its own", async () => {
    const a = await mqtt.connectAsync(h.url, { clientId: 'cam-a.sub', reconnectPeriod: 0 });
    const filters = ['devices/cam-b/result', 'devices/+/result', '#', 'devices/cam-a/result', 'bridge/+/status'];
    expect(await subscribeGranted(a, filters)).toEqual([128, 128, 128, 1, 1]);
    // The refused subscription really delivers nothing: B's reply never reaches A.
    const seen: string[] = [];
    a.on('message', (topic) => seen.push(topic));
    const b = await h.device('cam-b');
    await b.publish('normal', ask('for-b-only'));
    await b.reply('for-b-only');
    // A barrier: A's own request, answered after B's reply was out; a copy of that would come first.
    await a.publishAsync('devices/cam-a/infer/normal', JSON.stringify(ask('for-a')), { qos: 1 });
    await eventually("A's own reply", () => seen.includes('devices/cam-a/result'));
    expect(seen.filter((t) => t.startsWith('devices/'))).toEqual(['devices/cam-a/result']);
    await a.endAsync();
  });

  it('MQTT 5 (Aedes 2): a refused publish is answered PUBACK 0x87 and the device stays; its own request is answered', async () => {
    const a = await mqtt.connectAsync(h.url, { clientId: 'cam-a', reconnectPeriod: 0, protocolVersion: 5 });
    let closed = false;
    a.once('close', () => (closed = true));
    const acks: Array<{ reasonCode?: number; properties?: { reasonString?: string } }> = [];
    a.on('packetreceive', (p) => {
      if (p.cmd === 'puback') acks.push(p);
    });
    expect(await subscribeGranted(a, ['devices/cam-b/result', 'devices/cam-a/result'])).toEqual([0x87, 1]);
    await expect(a.publishAsync('devices/cam-b/infer/high', JSON.stringify(ask('forged')), { qos: 1 })).rejects.toThrow();
    expect(acks[0]).toMatchObject({ reasonCode: 0x87, properties: { reasonString: 'publish not authorized' } });
    const replies: string[] = [];
    a.on('message', (topic, payload) => replies.push(JSON.parse(payload.toString()).id));
    await a.publishAsync('devices/cam-a/infer/high', JSON.stringify(ask('v5-own')), { qos: 1 });
    await eventually('its own reply', () => replies.length > 0, 2000);
    expect(replies).toEqual(['v5-own']);
    expect(closed).toBe(false);
    expect(h.upstream.requests.length).toBe(1);
    await a.endAsync();
  });

  it('publishes the retained online status that devices may read', async () => {
    const a = await mqtt.connectAsync(h.url, { clientId: 'cam-s', reconnectPeriod: 0 });
    const status = new Promise<{ retain: boolean; payload: unknown }>((resolve) =>
      a.on('message', (_t, payload, packet) => resolve({ retain: packet.retain, payload: JSON.parse(payload.toString()) })),
    );
    await a.subscribeAsync('bridge/+/status');
    expect(await status).toMatchObject({ retain: true, payload: { state: 'online', instance: h.bridge.instanceId } });
    await a.endAsync();
  });

  it('refuses $SYS publishes, a client id that is no device id, and a will on a foreign topic', async () => {
    const a = await mqtt.connectAsync(h.url, { clientId: 'cam-x', reconnectPeriod: 0 });
    const closed = new Promise<void>((resolve) => a.once('close', () => resolve()));
    a.publish('$SYS/broker/fake', 'x', { qos: 1 });
    await closed;
    a.end(true);

    await expect(mqtt.connectAsync(h.url, { clientId: 'no/slashes', reconnectPeriod: 0 })).rejects.toThrow(/Identifier rejected/i);
    await expect(
      mqtt.connectAsync(h.url, {
        clientId: 'cam-w',
        reconnectPeriod: 0,
        will: { topic: 'devices/cam-b/infer/high', payload: Buffer.from('{}'), qos: 1, retain: false },
      }),
    ).rejects.toThrow(/Not authorized/i);
  });

  it('never stores a request as a retained message', async () => {
    const d = await h.device('cam-r');
    await d.client.publishAsync('devices/cam-r/infer/high', JSON.stringify(ask('ret')), { qos: 1, retain: true });
    await d.reply('ret');
    const retained: string[] = [];
    // Aedes' types omit its persistence; its retained store is what a new subscriber would get.
    const { persistence } = h.bridge.broker!.aedes as unknown as {
      persistence: { createRetainedStream(pattern: string): AsyncIterable<{ topic: string }> };
    };
    for await (const packet of persistence.createRetainedStream('#')) retained.push(packet.topic);
    expect(retained.filter((t: string) => t.startsWith('devices/'))).toEqual([]);
    expect(retained.some((t: string) => t.startsWith('bridge/'))).toBe(true); // the check can see retained messages
  });
});

describe('connection limit', () => {
  it('answers CONNACK "server unavailable" over MAX_CONNECTIONS and keeps serving the connected device', async () => {
    const h = await startHarness({ MAX_CONNECTIONS: '1' });
    try {
      const first = await h.device('cam-1');
      await expect(mqtt.connectAsync(h.url, { clientId: 'cam-2', reconnectPeriod: 0 })).rejects.toThrow(/Server unavailable/i);
      await first.publish('normal', ask('still-served'));
      expect((await first.reply('still-served'))[0]?.ok).toBe(true);
    } finally {
      await h.close();
    }
  });
});
