// Finding: anonymous clients could be any AUTH_FILE device. With anonymous access on, a client
// id `cam-reg` or `cam-reg.x` without credentials read the registered device's replies,
// published as it and took over its session. A device id that has credentials (a file user,
// or a certificate this instance has seen) is now refused to anonymous clients: CONNACK not
// authorized (5 on MQTT 3.1.1, 0x87 on MQTT 5), counted and logged; the registered device
// keeps its connection and its replies; an unregistered anonymous device still works.
import { join } from 'node:path';
import type { MqttClient } from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ask, connectDevice, okOf, type Harness, startHarness } from '../../helpers/harness.js';
import { connectTcp, connectTls, disconnectedWithin, makePki, tempDir, writeAuthFile, type Pki, type TestUser } from '../../helpers/security.js';

const USERS: TestUser[] = [{ username: 'cam-reg', password: 'cam-reg-pw', role: 'device', device_id: 'cam-reg' }];
const NOT_AUTHORIZED = { 4: 5, 5: 0x87 } as const;

const dir = tempDir();
const authFile = join(dir.path, 'auth.json');
let pki: Pki;
let h: Harness;

beforeAll(async () => {
  pki = makePki(dir.path);
  await writeAuthFile(authFile, USERS);
  h = await startHarness({
    AUTH_FILE: authFile,
    ALLOW_ANONYMOUS: 'true',
    MQTT_TLS_PORT: '0',
    TLS_CERT_FILE: pki.serverCertFile,
    TLS_KEY_FILE: pki.serverKeyFile,
    TLS_CA_FILE: pki.caFile,
  });
});
afterAll(async () => {
  await h?.close();
  dir.remove();
});

/** The CONNACK code of a refused anonymous CONNECT. */
async function refusedCode(clientId: string, protocolVersion: 4 | 5): Promise<number | undefined> {
  try {
    const client = await connectTcp(h.bridge.mqttPort, { clientId, protocolVersion });
    await client.endAsync(true);
    return 0;
  } catch (err) {
    return (err as { code?: number }).code;
  }
}

/** Every reply a client receives on `devices/{deviceId}/result`, by request id. */
async function listen(client: MqttClient, deviceId: string): Promise<string[]> {
  const ids: string[] = [];
  client.on('message', (topic, payload) => {
    if (topic === `devices/${deviceId}/result`) ids.push((JSON.parse(payload.toString()) as { id: string }).id);
  });
  await client.subscribeAsync(`devices/${deviceId}/result`, { qos: 1 });
  return ids;
}

const waitFor = async (check: () => boolean, ms = 5000): Promise<void> => {
  const deadline = Date.now() + ms;
  while (!check() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
};

describe('isolation: anonymous clients cannot be a device that has credentials', () => {
  it('refuses anonymous cam-reg and cam-reg.x on MQTT 3.1.1 and 5; the registered device keeps its session and its replies', async () => {
    const device = await connectTcp(h.bridge.mqttPort, { clientId: 'cam-reg', username: 'cam-reg', password: 'cam-reg-pw' });
    const replies = await listen(device, 'cam-reg');
    const before = h.bridge.broker!.refusals.connect;

    for (const clientId of ['cam-reg', 'cam-reg.x']) {
      for (const version of [4, 5] as const) {
        expect(await refusedCode(clientId, version), `${clientId} v${version}`).toBe(NOT_AUTHORIZED[version]);
      }
    }
    expect(h.bridge.broker!.refusals.connect - before).toBe(4);
    // Not taken over: the registered device is still connected, and its request is answered to it.
    expect(await disconnectedWithin(device, 200)).toBe(false);
    await device.publishAsync('devices/cam-reg/infer/normal', JSON.stringify(ask('reg-1')), { qos: 1 });
    await waitFor(() => replies.includes('reg-1'));
    expect(replies).toEqual(['reg-1']);
    await device.endAsync();
  });

  it('still accepts an anonymous device whose id has no credentials, answered ok', async () => {
    const free = await connectDevice(h.url, 'cam-free', { protocolVersion: 5 });
    await free.publish('normal', ask('free-1'));
    const [reply] = await free.reply('free-1');
    expect(okOf(reply).id).toBe('free-1');
    await free.close();
  });

  it('applies a reload of AUTH_FILE (SIGHUP): a newly registered device id is refused to anonymous clients', async () => {
    const early = await connectTcp(h.bridge.mqttPort, { clientId: 'cam-new' });
    await early.endAsync();
    await writeAuthFile(authFile, [...USERS, { username: 'cam-new', password: 'cam-new-pw', role: 'device', device_id: 'cam-new' }]);
    expect(h.bridge.broker!.reloadAuth()).toEqual({ ok: true, users: 2 });
    expect(await refusedCode('cam-new', 4)).toBe(5);
    const registered = await connectTcp(h.bridge.mqttPort, { clientId: 'cam-new', username: 'cam-new', password: 'cam-new-pw' });
    await registered.endAsync();
  });

  it('refuses to anonymous clients the id of a device that presented a client certificate', async () => {
    const cert = await connectTls(h.bridge.broker!.tlsPort as number, { ca: pki.ca, ...pki.client('cam-cert'), clientId: 'cam-cert' });
    expect(await refusedCode('cam-cert.x', 5)).toBe(0x87);
    expect(await disconnectedWithin(cert, 200)).toBe(false);
    await cert.endAsync();
  });
});
