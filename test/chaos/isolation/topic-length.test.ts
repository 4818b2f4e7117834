// Finding: a SUBSCRIBE to a 60 KB topic filter inside the device's own namespace was granted
// (and kept, matched against every publish, stored with a persistent session). MAX_TOPIC_LENGTH
// (default 1024 bytes) now bounds every topic and filter a client sends the embedded broker:
// SUBSCRIBE granted the failure code, PUBLISH refused like any forbidden publish (MQTT 5:
// PUBACK 0x87 and the client stays; MQTT 3.1.1: dropped with its connection), UNSUBSCRIBE drops
// the connection (MQTT 5: DISCONNECT 0x8F), a Will refuses the CONNECT. An innocent device is
// answered ok meanwhile.
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ask, okOf, startHarness, subscribeGranted, type Harness } from '../../helpers/harness.js';
import { disconnectedWithin } from '../../helpers/security.js';

const MAX = 1024;
const LONG = 60 * 1024;
let h: Harness;
beforeAll(async () => {
  h = await startHarness({ MAX_TOPIC_LENGTH: String(MAX) });
});
afterAll(async () => {
  await h?.close();
});

const connect = (clientId: string, options: IClientOptions = {}): Promise<MqttClient> =>
  mqtt.connectAsync(h.url, { clientId, reconnectPeriod: 0, connectTimeout: 5000, ...options });

/** `devices/{id}/` followed by `a`s, `bytes` long in all. */
const ownFilter = (deviceId: string, bytes: number): string => `devices/${deviceId}/`.padEnd(bytes, 'a');

describe('isolation: MAX_TOPIC_LENGTH bounds topics and filters in the embedded broker', () => {
  it('grants a SUBSCRIBE of MAX_TOPIC_LENGTH bytes and refuses a 60 KB filter in the device\u2019s own namespace (MQTT 3.1.1 and 5)', async () => {
    const before = h.bridge.broker!.refusals.subscribe;
    const v4 = await connect('cam-sub4');
    expect(await subscribeGranted(v4, [ownFilter('cam-sub4', MAX), ownFilter('cam-sub4', LONG), ownFilter('cam-sub4', MAX + 1)])).toEqual([1, 128, 128]);
    const v5 = await connect('cam-sub5', { protocolVersion: 5 });
    expect(await subscribeGranted(v5, [ownFilter('cam-sub5', LONG)])).toEqual([0x87]);
    expect(h.bridge.broker!.refusals.subscribe - before).toBe(3);
    // Multi-byte characters count in bytes: 400 three-byte characters are 1 200 bytes.
    expect(await subscribeGranted(v4, [`devices/cam-sub4/${'\u30e9'.repeat(400)}`])).toEqual([128]);
    await Promise.all([v4.endAsync(), v5.endAsync()]);
  });

  it('refuses a PUBLISH on an over-long topic: MQTT 5 PUBACK 0x87 and the device stays, MQTT 3.1.1 dropped; nothing reaches the upstream', async () => {
    const longTopic = `devices/cam-pub5/image/normal/tpl/${'r'.repeat(2 * MAX)}`;
    const v5 = await connect('cam-pub5', { protocolVersion: 5 });
    const acks: Array<{ reasonCode?: number; properties?: { reasonString?: string } }> = [];
    v5.on('packetreceive', (p) => {
      if (p.cmd === 'puback') acks.push(p as (typeof acks)[number]);
    });
    await expect(v5.publishAsync(longTopic, Buffer.from('img'), { qos: 1 })).rejects.toThrow();
    expect(acks[0]).toMatchObject({ reasonCode: 0x87, properties: { reasonString: `topic longer than MAX_TOPIC_LENGTH (${MAX} bytes)` } });
    expect(await disconnectedWithin(v5, 100)).toBe(false);
    await v5.endAsync();

    const v4 = await connect('cam-pub4');
    v4.publish(`devices/cam-pub4/infer/${'n'.repeat(2 * MAX)}`, JSON.stringify(ask('long-4')), { qos: 1 });
    expect(await disconnectedWithin(v4, 5000)).toBe(true);
    v4.end(true);
    expect(h.upstream.requests).toEqual([]);
  });

  it('drops a client that UNSUBSCRIBEs an over-long filter (MQTT 5: DISCONNECT 0x8F)', async () => {
    const v5 = await connect('cam-uns5', { protocolVersion: 5 });
    const disconnect = new Promise<number | undefined>((resolve) => v5.once('disconnect', (p) => resolve(p.reasonCode)));
    v5.unsubscribe(ownFilter('cam-uns5', LONG));
    expect(await disconnect).toBe(0x8f);
    v5.end(true);
    const v4 = await connect('cam-uns4');
    v4.unsubscribe(ownFilter('cam-uns4', LONG));
    expect(await disconnectedWithin(v4, 5000)).toBe(true);
    v4.end(true);
  });

  it('refuses a CONNECT whose Will topic is over-long (not authorized), and accepts one of MAX_TOPIC_LENGTH bytes', async () => {
    const will = (deviceId: string, bytes: number) => ({
      topic: `devices/${deviceId}/infer/`.padEnd(bytes, 'w'),
      payload: Buffer.from('{}'),
      qos: 0 as const,
      retain: false,
    });
    await expect(connect('cam-will', { will: will('cam-will', LONG) })).rejects.toMatchObject({ code: 5 });
    await expect(connect('cam-will', { protocolVersion: 5, will: will('cam-will', MAX + 1) })).rejects.toMatchObject({ code: 0x87 });
    // Within the length, the topic rules decide as before: an infer topic with an unknown priority is the device's own.
    const ok = await connect('cam-will', { will: will('cam-will', MAX) });
    await ok.endAsync();
  });

  it('answers an innocent device ok', async () => {
    const device = await h.device('cam-innocent');
    await device.publish('normal', ask('innocent-1'));
    const [reply] = await device.reply('innocent-1');
    expect(okOf(reply).id).toBe('innocent-1');
  });
});
