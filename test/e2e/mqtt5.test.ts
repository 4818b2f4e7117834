// MQTT 5 PUBACK reason codes, which only the embedded broker sends (the plant's broker
// acknowledges before the bridge has the request). The rest of MQTT 5 as a device sees it, over
// both broker modes, is in test/helpers/device-suite.ts.
import { afterEach, describe, expect, it } from 'vitest';
import { ask, okOf, startHarness, type Device, type Harness } from '../helpers/harness.js';

describe('MQTT 5 PUBACK reason codes (embedded broker)', () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  /** The PUBACK of one QoS 1 publish: its reason code and reason string. */
  async function pubackOf(device: Device, topic: string, body: string): Promise<{ reasonCode: number; reason: string | undefined }> {
    const acks: Array<{ reasonCode?: number; properties?: { reasonString?: string } }> = [];
    const onPacket = (packet: { cmd: string }): void => {
      if (packet.cmd === 'puback') acks.push(packet as (typeof acks)[number]);
    };
    device.client.on('packetreceive', onPacket);
    await device.client.publishAsync(topic, body, { qos: 1 }).catch(() => undefined); // mqtt.js rejects a code ≥ 0x80
    device.client.off('packetreceive', onPacket);
    const ack = acks[0];
    return { reasonCode: ack?.reasonCode ?? 0, reason: ack?.properties?.reasonString };
  }

  it('refuses with the code of the error reply, keeps the connection, and still sends the error reply', async () => {
    h = await startHarness({ DEVICE_RATE_LIMIT_RPM: '3' }); // the invalid publish counts too
    const device = await h.device('cam-ack5', { protocolVersion: 5 });
    let closed = false;
    device.client.on('close', () => (closed = true));
    const topic = 'devices/cam-ack5/infer/normal';

    expect(await pubackOf(device, topic, '{"id": "j1", oops')).toEqual({ reasonCode: 0x99, reason: 'payload is not valid JSON' });
    expect((await pubackOf(device, topic, JSON.stringify(ask('ok-1')))).reasonCode).toBe(0);
    expect((await pubackOf(device, topic, JSON.stringify(ask('ok-2')))).reasonCode).toBe(0);
    const limited = await pubackOf(device, topic, JSON.stringify(ask('over')));
    expect(limited.reasonCode).toBe(0x97);
    expect(limited.reason).toMatch(/over 3 requests\/min/);

    expect((await device.reply('over'))[0]).toMatchObject({ ok: false, error: { code: 'rate_limited' } });
    expect((await device.reply(null))[0]).toMatchObject({ ok: false, error: { code: 'invalid_request' } });
    expect(okOf((await device.reply('ok-2'))[0]).id).toBe('ok-2');
    expect(closed).toBe(false);
  });

  it('gives an MQTT 3.1.1 device a plain PUBACK and the error reply', async () => {
    h = await startHarness();
    const device = await h.device('cam-ack4', { protocolVersion: 4 });
    expect(await pubackOf(device, 'devices/cam-ack4/infer/normal', 'not json')).toEqual({ reasonCode: 0, reason: undefined });
    expect((await device.reply(null))[0]).toMatchObject({ ok: false, error: { code: 'invalid_request' } });
  });
});
