// The MQTT 5 part of the device contract (test/helpers/device-suite.ts): Response Topic and
// Correlation Data, Message Expiry, user properties, and an MQTT 3.1.1 device beside.
import type { IPublishPacket } from 'mqtt';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ReplySchema, topics, type Reply } from '../../contract/index.js';
import { ask, okOf, startHarness, type BrokerMode, type Device, type Harness } from './harness.js';
import { waitUntil } from './wait.js';

/** The first PUBLISH the device received on `topic`, waiting up to `timeoutMs`. */
async function received(device: Device, topic: string, timeoutMs = 5000): Promise<IPublishPacket> {
  await waitUntil(() => device.packets.some((p) => p.topic === topic), timeoutMs, 10);
  const packet = device.packets.find((p) => p.topic === topic);
  if (!packet) throw new Error(`${device.deviceId}: nothing on ${topic} after ${timeoutMs} ms`);
  return packet;
}

const replyOf = (packet: IPublishPacket): Reply => ReplySchema.parse(JSON.parse(packet.payload.toString()));

/** Publishes at QoS 1; a refusal in the PUBACK (embedded broker) is not an error here: the reply says why. */
async function publishV5(device: Device, priority: string, body: unknown, properties: IPublishPacket['properties']): Promise<void> {
  await device.client
    .publishAsync(`devices/${device.deviceId}/infer/${priority}`, JSON.stringify(body), { qos: 1, properties })
    .catch((err: { code?: unknown }) => {
      if (typeof err.code !== 'number') throw err;
    });
}

/** The MQTT 5 tests, within the device contract's describe for `mode`. */
export function mqtt5Suite(mode: BrokerMode): void {
  const start = (env: Record<string, string> = {}, sim: Parameters<typeof startHarness>[1] = {}): Promise<Harness> =>
    startHarness(env, sim, undefined, { mode });

  describe('MQTT 5', () => {
    let h: Harness;
    beforeEach(async () => {
      h = await start();
    });
    afterEach(async () => {
      await h.close();
    });

    it('answers an MQTT 5 device and an MQTT 3.1.1 device side by side', async () => {
      const v5 = await h.device('cam-v5', { protocolVersion: 5 });
      const v3 = await h.device('cam-v3', { protocolVersion: 4 });
      await v5.publish('normal', ask('five', 'from five'));
      await v3.publish('normal', ask('three', 'from three'));
      expect(okOf((await v5.reply('five'))[0]).content).toBe('sim answer to: from five');
      expect(okOf((await v3.reply('three'))[0]).content).toBe('sim answer to: from three');
    });

    it('publishes the reply on the Response Topic with the Correlation Data byte for byte, and on the result topic', async () => {
      const device = await h.device('cam-rr', { protocolVersion: 5 });
      await device.client.subscribeAsync('devices/cam-rr/rpc/#', { qos: 1 });
      // Not valid UTF-8 on purpose: correlation data is binary.
      const correlationData = Buffer.from([0x00, 0xff, 0xfe, 0x41, 0x80]);
      await publishV5(device, 'high', ask('rr-1', 'round trip'), { responseTopic: 'devices/cam-rr/rpc/line-3', correlationData });

      const response = await received(device, 'devices/cam-rr/rpc/line-3');
      expect(response.qos).toBe(1);
      expect(Buffer.compare(response.properties?.correlationData ?? Buffer.alloc(0), correlationData)).toBe(0);
      expect(response.properties?.contentType).toBe('application/json');
      expect(okOf(replyOf(response))).toMatchObject({ id: 'rr-1', content: 'sim answer to: round trip' });
      const [onResult] = await device.reply('rr-1');
      expect(onResult).toEqual(replyOf(response));
    });

    it('refuses a Response Topic outside the device namespace, naming it, and publishes nothing there', async () => {
      const device = await h.device('cam-bad', { protocolVersion: 5 });
      const other = await h.device('cam-other', { protocolVersion: 5 });
      await other.client.subscribeAsync('devices/cam-other/#', { qos: 1 });
      for (const [id, topic] of [
        ['bad-1', 'devices/cam-other/rpc/x'],
        ['bad-2', 'devices/cam-bad/infer/high'],
        ['bad-3', 'plant/line-3'],
      ] as const) {
        await publishV5(device, 'normal', ask(id), { responseTopic: topic });
        const [reply] = await device.reply(id);
        expect(reply).toMatchObject({ id, ok: false, error: { code: 'invalid_request' } });
        expect(reply?.ok === false && reply.error.message).toMatch(/^Response Topic: /);
      }
      // A barrier: a refusal of `other`'s own, published to it by the bridge after anything the
      // three above could have sent there. Once it is in, nothing else came.
      await publishV5(other, 'normal', { id: 'barrier' }, {});
      expect((await other.reply('barrier'))[0]).toMatchObject({ ok: false, error: { code: 'invalid_request' } });
      expect(other.replies.filter((r) => r.id !== 'barrier')).toEqual([]);
      expect(other.packets.filter((p) => !p.topic.startsWith('devices/cam-other/infer/') && p.topic !== topics.result('cam-other'))).toEqual([]);
      expect(h.upstream.requests).toHaveLength(0);
    });

    it('takes the Message Expiry Interval as the deadline: a request that waits past it is answered expired', async () => {
      await h.close();
      h = await start({ MAX_CONCURRENCY: '1' }, { latencyMs: 1500 });
      const device = await h.device('cam-exp', { protocolVersion: 5 });
      await device.publish('critical', ask('blocker'));
      await h.upstream.requested(1, 2000);
      await publishV5(device, 'critical', ask('late'), { messageExpiryInterval: 1 });
      const [late] = await device.reply('late', { timeoutMs: 4000 });
      expect(late).toMatchObject({ id: 'late', ok: false, error: { code: 'expired' } });
      expect(okOf((await device.reply('blocker', { timeoutMs: 4000 }))[0]).id).toBe('blocker');
      expect(h.upstream.requests).toHaveLength(1);
    });

    it('gives the reply on the Response Topic the time left as its Message Expiry Interval', async () => {
      const device = await h.device('cam-left', { protocolVersion: 5 });
      await device.client.subscribeAsync('devices/cam-left/rpc/#', { qos: 1 });
      await publishV5(device, 'high', ask('left'), { responseTopic: 'devices/cam-left/rpc/a', messageExpiryInterval: 60 });
      const response = await received(device, 'devices/cam-left/rpc/a');
      const left = response.properties?.messageExpiryInterval ?? 0;
      expect(left).toBeGreaterThanOrEqual(55);
      expect(left).toBeLessThanOrEqual(60);
    });

    it('echoes the request user properties on its replies and refuses more than it can echo', async () => {
      const device = await h.device('cam-up', { protocolVersion: 5 });
      await device.client.subscribeAsync('devices/cam-up/rpc/#', { qos: 1 });
      const userProperties = { line: '3', station: ['a', 'b'] };
      await publishV5(device, 'normal', ask('up-1'), { responseTopic: 'devices/cam-up/rpc/u', userProperties });
      const response = await received(device, 'devices/cam-up/rpc/u');
      expect(response.properties?.userProperties).toEqual(userProperties);
      await device.reply('up-1');
      const onResult = device.packets.find((p) => p.topic === 'devices/cam-up/result');
      expect(onResult?.properties?.userProperties).toEqual(userProperties);

      const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v']));
      await publishV5(device, 'normal', ask('up-2'), { userProperties: many });
      const [refused] = await device.reply('up-2');
      expect(refused).toMatchObject({ ok: false, error: { code: 'invalid_request' } });
      expect(refused?.ok === false && refused.error.message).toMatch(/^User Property: at most 16 pairs/);
    });
  });
}
