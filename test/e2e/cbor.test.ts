// Compact payloads: an MQTT 5 request with Content Type application/cbor is read as CBOR and
// answered in CBOR, on the result topic and on its Response Topic; everything else stays JSON.
// Checked on what a raw MQTT client receives, with the embedded broker and the plant's alike.
import { decode, encode } from 'cbor-x';
import mqtt, { type IPublishPacket, type MqttClient } from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReplySchema, type Reply } from '../../contract/index.js';
import { waitUntil } from '../helpers/chaos.js';
import { ask, BROKER_MODES, okOf, startHarness, type Harness } from '../helpers/harness.js';

const CBOR = 'application/cbor';

/** A device as a raw mqtt.js client (the harness's device reads its result topic as JSON). */
interface RawDevice {
  client: MqttClient;
  id: string;
  packets: IPublishPacket[];
  /** Publishes at QoS 1; a refusal in the PUBACK (embedded broker) is not an error here: the reply says why. */
  publish(payload: Buffer | string, properties?: IPublishPacket['properties']): Promise<void>;
  /** The `nth` PUBLISH received on `topic` (1-based), waiting for it. */
  received(topic: string, nth?: number): Promise<IPublishPacket>;
}

async function rawDevice(h: Harness, id: string, protocolVersion: 4 | 5 = 5): Promise<RawDevice> {
  const client = await mqtt.connectAsync(h.url, { clientId: id, protocolVersion, reconnectPeriod: 0, clean: true });
  const packets: IPublishPacket[] = [];
  client.on('message', (_topic, _payload, packet) => packets.push(packet));
  await client.subscribeAsync([`devices/${id}/result`, `devices/${id}/rpc/#`], { qos: 1 });
  const on = (topic: string): IPublishPacket[] => packets.filter((p) => p.topic === topic);
  return {
    client,
    id,
    packets,
    async publish(payload, properties) {
      await client.publishAsync(`devices/${id}/infer/normal`, payload, { qos: 1, ...(properties ? { properties } : {}) }).catch((err: { code?: unknown }) => {
        if (typeof err.code !== 'number') throw err;
      });
    },
    async received(topic, nth = 1) {
      await waitUntil(() => on(topic).length >= nth, 5000, 10);
      const packet = on(topic)[nth - 1];
      if (!packet) throw new Error(`${id}: ${on(topic).length}/${nth} publishes on ${topic}`);
      return packet;
    },
  };
}

const fromCbor = (packet: IPublishPacket): Reply => ReplySchema.parse(decode(packet.payload as Buffer));
const fromJson = (packet: IPublishPacket): Reply => ReplySchema.parse(JSON.parse(packet.payload.toString()));
const upstreamAsked = (h: Harness, content: string): unknown[] =>
  h.upstream.requests.filter((r) => JSON.stringify(r.body).includes(content)).map((r) => r.body);

describe.each(BROKER_MODES)('CBOR payloads (%s broker)', (mode) => {
  let h: Harness;
  const devices: RawDevice[] = [];
  const device = async (id: string, protocolVersion: 4 | 5 = 5): Promise<RawDevice> => {
    const d = await rawDevice(h, id, protocolVersion);
    devices.push(d);
    return d;
  };
  beforeAll(async () => {
    h = await startHarness({ MAX_PAYLOAD_BYTES: '2048', DEVICE_RATE_LIMIT_RPM: '1000' }, {}, undefined, { mode });
  });
  afterAll(async () => {
    await Promise.all(devices.map((d) => d.client.endAsync()));
    await h.close();
  });

  it('answers a CBOR request in CBOR on the result topic and on its Response Topic, with the Correlation Data', async () => {
    const d = await device('cbor-rr');
    const correlationData = Buffer.from([0x00, 0xff, 0x41]);
    const extra = { temperature: 0.25, max_tokens: 64, cache: false };
    await d.publish(encode(ask('c-1', 'Part A7: burr 0.31 mm?', extra)), { contentType: CBOR, responseTopic: 'devices/cbor-rr/rpc/a', correlationData });

    const response = await d.received('devices/cbor-rr/rpc/a');
    expect(response.properties?.contentType).toBe(CBOR);
    expect(Buffer.compare(response.properties?.correlationData ?? Buffer.alloc(0), correlationData)).toBe(0);
    expect(okOf(fromCbor(response))).toMatchObject({ id: 'c-1', ok: true, content: 'sim answer to: Part A7: burr 0.31 mm?' });
    const onResult = await d.received('devices/cbor-rr/result');
    expect(onResult.properties?.contentType).toBe(CBOR);
    expect(Buffer.compare(onResult.payload as Buffer, response.payload as Buffer)).toBe(0);
    // Plain CBOR: a map first, no tag (cbor-x records), so any CBOR decoder reads it.
    expect(((onResult.payload as Buffer)[0] ?? 0) >> 5).toBe(5);

    // The upstream gets what the same request in JSON gives it.
    await d.publish(JSON.stringify(ask('j-1', 'Part A7: burr 0.31 mm?', extra)));
    await d.received('devices/cbor-rr/result', 2);
    const [fromCborRequest, fromJsonRequest] = upstreamAsked(h, 'Part A7: burr 0.31 mm?');
    expect(fromCborRequest).toEqual(fromJsonRequest);
    expect(fromCborRequest).toMatchObject({ temperature: 0.25, max_tokens: 64 });
  });

  it('answers a JSON request from the same MQTT 5 client in JSON, with or without its Content Type', async () => {
    const d = await device('cbor-mixed');
    await d.publish(encode(ask('m-1', 'mixed one')), { contentType: CBOR });
    await d.publish(JSON.stringify(ask('m-2', 'mixed two')));
    await d.publish(JSON.stringify(ask('m-3', 'mixed three')), { contentType: 'application/json', responseTopic: 'devices/cbor-mixed/rpc/j' });
    const results = await Promise.all([1, 2, 3].map((n) => d.received('devices/cbor-mixed/result', n)));
    const formats = results.map((p) => {
      const reply = p.properties?.contentType === CBOR ? fromCbor(p) : fromJson(p);
      return [reply.id, reply.ok, p.properties?.contentType ?? 'none'];
    });
    expect(formats).toEqual(
      expect.arrayContaining([
        ['m-1', true, CBOR],
        ['m-2', true, 'none'],
        ['m-3', true, 'none'],
      ]),
    );
    const response = await d.received('devices/cbor-mixed/rpc/j');
    expect(response.properties?.contentType).toBe('application/json');
    expect(okOf(fromJson(response)).content).toBe('sim answer to: mixed three');
  });

  it('answers malformed CBOR, or CBOR JSON cannot carry, with invalid_request in CBOR and calls no upstream', async () => {
    const d = await device('cbor-bad');
    const before = h.upstream.requests.length;
    const truncated = encode(ask('b-1', 'never')).subarray(0, 12);
    await d.publish(truncated, { contentType: CBOR, responseTopic: 'devices/cbor-bad/rpc/e', correlationData: Buffer.from('k1') });
    const response = await d.received('devices/cbor-bad/rpc/e');
    expect(response.properties?.contentType).toBe(CBOR);
    expect(response.properties?.correlationData?.toString()).toBe('k1');
    expect(fromCbor(response)).toEqual({ id: null, ok: false, priority: 'normal', error: { code: 'invalid_request', message: 'payload is not valid CBOR' } });

    // A byte string where JSON would have a string: refused, naming the request.
    await d.publish(encode({ ...ask('b-2'), messages: [{ role: 'user', content: Buffer.from('bytes') }] }), { contentType: CBOR });
    const second = await d.received('devices/cbor-bad/result', 2);
    expect(second.properties?.contentType).toBe(CBOR);
    expect(fromCbor(second)).toMatchObject({ id: 'b-2', ok: false, error: { code: 'invalid_request', message: expect.stringMatching(/JSON cannot carry/) } });

    // Too large: the reply still names the request, in CBOR.
    await d.publish(encode(ask('b-3', 'y'.repeat(4096))), { contentType: CBOR });
    const third = await d.received('devices/cbor-bad/result', 3);
    expect(fromCbor(third)).toMatchObject({ id: 'b-3', ok: false, error: { code: 'payload_too_large' } });

    // A refused Response Topic: the error reply is CBOR on the result topic.
    await d.publish(encode(ask('b-4')), { contentType: CBOR, responseTopic: 'devices/other/rpc/x' });
    const fourth = await d.received('devices/cbor-bad/result', 4);
    expect(fromCbor(fourth)).toMatchObject({ id: 'b-4', ok: false, error: { code: 'invalid_request', message: expect.stringMatching(/^Response Topic: /) } });

    // A barrier: a good request after them; a call for any of them would come before its own.
    await d.publish(encode(ask('b-5', 'the barrier')), { contentType: CBOR });
    expect(okOf(fromCbor(await d.received('devices/cbor-bad/result', 5)))).toMatchObject({ id: 'b-5' });
    expect(h.upstream.requests.length).toBe(before + 1);
    expect(upstreamAsked(h, 'the barrier')).toHaveLength(1);
  });

  it('publishes the stored reply again in CBOR for a duplicate CBOR request, and in JSON for a JSON one', async () => {
    const d = await device('cbor-dup');
    const request = encode(ask('d-1', 'only once'));
    await d.publish(request, { contentType: CBOR });
    const first = fromCbor(await d.received('devices/cbor-dup/result'));
    await d.publish(request, { contentType: CBOR });
    const again = await d.received('devices/cbor-dup/result', 2);
    expect(again.properties?.contentType).toBe(CBOR);
    expect(fromCbor(again)).toEqual(first);
    await d.publish(JSON.stringify(ask('d-1', 'only once')));
    const asJson = await d.received('devices/cbor-dup/result', 3);
    expect(fromJson(asJson)).toEqual(first);
    expect(okOf(first).content).toBe('sim answer to: only once');
    expect(upstreamAsked(h, 'only once')).toHaveLength(1);
  });

  it('answers an MQTT 3.1.1 device in JSON always: it has no Content Type to ask for CBOR', async () => {
    const d = await device('cbor-v3', 4);
    await d.publish(JSON.stringify(ask('v-1', 'from three')));
    expect(okOf(fromJson(await d.received('devices/cbor-v3/result'))).content).toBe('sim answer to: from three');
    await d.publish(encode(ask('v-2', 'cbor from three')));
    expect(fromJson(await d.received('devices/cbor-v3/result', 2))).toMatchObject({
      ok: false,
      error: { code: 'invalid_request', message: 'payload is not valid JSON' },
    });
    expect(upstreamAsked(h, 'cbor from three')).toHaveLength(0);
  });
});
