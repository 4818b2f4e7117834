// MQTT 5 properties a PUBLISH gives more than once (a protocol error the embedded broker's
// decoder passes on as arrays): the request is refused `invalid_request` naming them, never
// answered `internal` (an array where one topic or type was expected) nor given a NaN deadline
// (an array of expiry intervals). Hand-written MQTT 5 bytes, as no client library sends them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeLength } from '../../device-sim/mqtt-frames.js';
import { requestPropertiesOf, type RequestProperties } from '../../contract/index.js';
import { fixedHeader, PacketType, RawClient } from '../helpers/raw-mqtt.js';
import { startHarness, type Harness } from '../helpers/harness.js';

const str = (s: string): Buffer => {
  const body = Buffer.from(s);
  return Buffer.concat([Buffer.from([body.length >> 8, body.length & 0xff]), body]);
};
const DEVICE = 'dup-props';

/** An MQTT 5 client: CONNECT (clean start), subscribed to its own namespace. */
async function mqtt5Client(port: number): Promise<RawClient> {
  const raw = await RawClient.open(port);
  const connect = Buffer.concat([str('MQTT'), Buffer.from([5, 0x02, 0, 60, 0]), str(DEVICE)]);
  raw.send(Buffer.concat([fixedHeader(PacketType.CONNECT, 0, connect.length), connect]));
  await raw.next(PacketType.CONNACK);
  const subscribe = Buffer.concat([Buffer.from([0, 1, 0]), str(`devices/${DEVICE}/result`), Buffer.from([1])]);
  raw.send(Buffer.concat([fixedHeader(PacketType.SUBSCRIBE, 2, subscribe.length), subscribe]));
  await raw.next(PacketType.SUBACK);
  return raw;
}

/** A QoS 1 request with these raw property bytes; resolves with its reply's JSON. */
async function ask(raw: RawClient, messageId: number, id: string, properties: Buffer): Promise<unknown> {
  const payload = Buffer.from(JSON.stringify({ id, messages: [{ role: 'user', content: id }] }));
  const publish = Buffer.concat([str(`devices/${DEVICE}/infer/normal`), Buffer.from([0, messageId]), encodeLength(properties.length), properties, payload]);
  raw.send(Buffer.concat([fixedHeader(PacketType.PUBLISH, 2, publish.length), publish]));
  const reply = await raw.next(PacketType.PUBLISH);
  const topicLength = reply.body.readUInt16BE(0);
  const at = 2 + topicLength + 2; // topic, packet id (QoS 1)
  const [propertiesLength, lengthBytes] = varInt(reply.body, at);
  return JSON.parse(reply.body.subarray(at + lengthBytes + propertiesLength).toString());
}

function varInt(bytes: Buffer, at: number): [number, number] {
  let value = 0;
  for (let i = 0; i < 4; i++) {
    const byte = bytes[at + i] as number;
    value += (byte & 0x7f) * 128 ** i;
    if (byte < 0x80) return [value, i + 1];
  }
  throw new Error('bad variable byte integer');
}

describe('MQTT 5 properties given more than once', () => {
  let h: Harness;
  let raw: RawClient;
  beforeAll(async () => {
    h = await startHarness();
    raw = await mqtt5Client(h.bridge.mqttPort);
  });
  afterAll(async () => {
    raw.destroy();
    await h.close();
  });

  it('are refused invalid_request naming them, on the result topic only', async () => {
    const twice = {
      'Message Expiry Interval': Buffer.from([0x02, 0, 0, 0, 5, 0x02, 0, 0, 0, 6]),
      'Response Topic': Buffer.concat([Buffer.from([0x08]), str(`devices/${DEVICE}/a`), Buffer.from([0x08]), str(`devices/${DEVICE}/b`)]),
      'Content Type': Buffer.concat([Buffer.from([0x03]), str('application/json'), Buffer.from([0x03]), str('application/cbor')]), // the first is kept: the reply is JSON
      'Correlation Data': Buffer.concat([Buffer.from([0x09]), str('k1'), Buffer.from([0x09]), str('k2')]),
    };
    let messageId = 1;
    for (const [name, bytes] of Object.entries(twice)) {
      const id = `twice-${messageId}`;
      expect(await ask(raw, messageId++, id, bytes)).toEqual({
        id,
        ok: false,
        priority: 'normal',
        error: { code: 'invalid_request', message: `MQTT 5 properties given more than once: ${name}` },
      });
    }
    // Once each, the same request is served.
    expect(await ask(raw, messageId, 'once', Buffer.from([0x02, 0, 0, 0, 5]))).toMatchObject({ id: 'once', ok: true });
  });

  it('reach no code that expects one value: only the first goes on', () => {
    const decoded = {
      responseTopic: ['devices/d/a', 'devices/d/b'],
      messageExpiryInterval: [5, 6],
      contentType: 'application/json',
    } as unknown as RequestProperties;
    expect(requestPropertiesOf(decoded)).toEqual({
      responseTopic: 'devices/d/a',
      correlationData: undefined,
      messageExpiryInterval: 5,
      userProperties: undefined,
      contentType: 'application/json',
      repeated: ['Response Topic', 'Message Expiry Interval'],
    });
    expect(requestPropertiesOf({ responseTopic: 'devices/d/a', userProperties: { k: ['1', '2'] } }).repeated).toBeUndefined();
  });
});
