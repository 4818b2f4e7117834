// MQTT 5 protocol limits of the embedded broker, with clients that push them on purpose:
// a topic-alias flood, a huge Receive Maximum, a Session Expiry beyond the cap.
import mqttPacket, { type Packet } from 'mqtt-packet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOPIC_ALIAS_MAXIMUM } from '../../broker/broker.js';
import { ask, okOf, startHarness, type Harness } from '../helpers/harness.js';
import { encodeLength, PacketType, RawClient } from '../helpers/raw-mqtt.js';

const V5 = { protocolVersion: 5 } as const;
const encode = (packet: Record<string, unknown>): Buffer => mqttPacket.generate(packet as unknown as Packet, V5);

/** The one packet of a raw frame, decoded as MQTT 5. */
function decode(type: number, flags: number, body: Buffer): Packet {
  const parser = mqttPacket.parser(V5);
  let decoded: Packet | undefined;
  parser.on('packet', (p) => (decoded = p));
  parser.parse(Buffer.concat([Buffer.from([(type << 4) | flags]), encodeLength(body.length), body]));
  if (!decoded) throw new Error(`could not decode packet type ${type}`);
  return decoded;
}

async function connectV5(port: number, clientId: string, properties: Record<string, unknown> = {}): Promise<{ raw: RawClient; connack: Packet }> {
  const raw = await RawClient.open(port);
  raw.send(encode({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 5, clean: true, keepalive: 60, clientId, properties }));
  const frame = await raw.next(PacketType.CONNACK);
  return { raw, connack: decode(PacketType.CONNACK, frame.flags, frame.body) };
}

describe('MQTT 5 limits of the embedded broker', () => {
  let h: Harness;
  const port = (): number => h.bridge.mqttPort;
  beforeAll(async () => {
    h = await startHarness({ MAX_SESSION_EXPIRY_S: '3600' });
  });
  afterAll(async () => {
    await h.close();
  });

  it('answers a request sent through a topic alias, and disconnects an alias past the maximum with 0x94', async () => {
    const device = await h.device('cam-alias', { protocolVersion: 5 });
    const { raw, connack } = await connectV5(port(), 'cam-alias.pub');
    expect((connack as { properties?: { topicAliasMaximum?: number } }).properties?.topicAliasMaximum).toBe(TOPIC_ALIAS_MAXIMUM);
    const topic = 'devices/cam-alias/infer/normal';
    raw.send(encode({ cmd: 'publish', topic, payload: JSON.stringify(ask('a1', 'first')), qos: 1, messageId: 1, properties: { topicAlias: 1 } }));
    raw.send(encode({ cmd: 'publish', topic: '', payload: JSON.stringify(ask('a2', 'by alias')), qos: 1, messageId: 2, properties: { topicAlias: 1 } }));
    expect(okOf((await device.reply('a2'))[0]).content).toBe('sim answer to: by alias');
    expect(okOf((await device.reply('a1'))[0]).content).toBe('sim answer to: first');

    // A flood: every alias re-registered many times, then one past the maximum.
    for (let i = 0; i < 2000; i += 1) {
      const alias = (i % TOPIC_ALIAS_MAXIMUM) + 1;
      raw.send(encode({ cmd: 'publish', topic: `devices/cam-alias/infer/x${i}`, payload: 'x', qos: 0, properties: { topicAlias: alias } }));
    }
    raw.send(encode({ cmd: 'publish', topic, payload: 'x', qos: 0, properties: { topicAlias: TOPIC_ALIAS_MAXIMUM + 1 } }));
    const frame = await raw.next(PacketType.DISCONNECT, 5000);
    expect((decode(PacketType.DISCONNECT, frame.flags, frame.body) as { reasonCode?: number }).reasonCode).toBe(0x94);
    expect(await raw.closedWithin(2000)).toBe(true);

    // The broker is still up and serving (another device: every publish of the flood counted
    // against cam-alias's own quota).
    const other = await h.device('cam-after-alias', { protocolVersion: 5 });
    await other.publish('normal', ask('after-flood'));
    expect(okOf((await other.reply('after-flood'))[0]).id).toBe('after-flood');
  });

  it('accepts a huge Receive Maximum and refuses a Receive Maximum of 0 (0x82)', async () => {
    const { raw, connack } = await connectV5(port(), 'cam-rm', { receiveMaximum: 65535 });
    expect((connack as { reasonCode?: number }).reasonCode).toBe(0);
    // The connection serves as any other: subscribe, request, acknowledgement, reply.
    raw.send(encode({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'devices/cam-rm/result', qos: 1 }] }));
    await raw.next(PacketType.SUBACK);
    raw.send(encode({ cmd: 'publish', topic: 'devices/cam-rm/infer/normal', payload: JSON.stringify(ask('rm-1')), qos: 1, messageId: 2 }));
    await raw.next(PacketType.PUBACK);
    const reply = await raw.next(PacketType.PUBLISH, 5000);
    expect(reply.body.toString()).toContain('"id":"rm-1","ok":true');
    raw.destroy();
    const refused = await connectV5(port(), 'cam-rm0', { receiveMaximum: 0 });
    expect((refused.connack as { reasonCode?: number }).reasonCode).toBe(0x82);
    refused.raw.destroy();
  });

  it('cuts a Session Expiry Interval beyond MAX_SESSION_EXPIRY_S to it and says so in CONNACK', async () => {
    const { raw, connack } = await connectV5(port(), 'cam-sx', { sessionExpiryInterval: 0xfffffffe });
    expect((connack as { properties?: { sessionExpiryInterval?: number } }).properties?.sessionExpiryInterval).toBe(3600);
    raw.destroy();
    const within = await connectV5(port(), 'cam-sx2', { sessionExpiryInterval: 60 });
    expect((within.connack as { properties?: { sessionExpiryInterval?: number } }).properties?.sessionExpiryInterval).toBeUndefined();
    within.raw.destroy();
  });
});
