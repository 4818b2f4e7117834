// The role × action matrix of docs/CONTRACT.md "Topics" over TCP, and a sample of it over TLS and
// WebSocket: device, observer and operator users of AUTH_FILE, publish and subscribe.
import type { MqttClient } from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ask, startHarness, subscribeGranted, type Harness } from '../helpers/harness.js';
import { connectTcp, connectTls, connectWs, disconnectedWithin, makePki, tempDir, writeAuthFile, type Pki, type TestUser } from '../helpers/security.js';

const USERS: TestUser[] = [
  { username: 'dev-a', password: 'pw-a', role: 'device', device_id: 'cam-a' },
  { username: 'scada', password: 'pw-o', role: 'observer' },
  { username: 'ops', password: 'pw-op', role: 'operator' },
];
const LOGIN = {
  device: { clientId: 'cam-a', username: 'dev-a', password: 'pw-a' },
  observer: { clientId: 'scada-1', username: 'scada', password: 'pw-o' },
  operator: { clientId: 'ops-1', username: 'ops', password: 'pw-op' },
} as const;
type RoleName = keyof typeof LOGIN;

const PUBLISH: Array<[string, Record<RoleName, boolean>]> = [
  ['devices/cam-a/infer/normal', { device: true, observer: false, operator: true }],
  ['devices/cam-b/infer/high', { device: false, observer: false, operator: true }],
  ['devices/cam-a/result', { device: false, observer: false, operator: false }],
  ['devices/cam-a/image/normal/defect-check/f1', { device: true, observer: false, operator: true }],
  ['devices/cam-b/image/normal/defect-check/f1', { device: false, observer: false, operator: true }],
  ['bridge/x/status', { device: false, observer: false, operator: false }],
  ['$SYS/broker/fake', { device: false, observer: false, operator: false }],
];

const SUBSCRIBE: Array<[string, Record<RoleName, boolean>]> = [
  ['devices/cam-a/result', { device: true, observer: true, operator: true }],
  ['devices/cam-b/result', { device: false, observer: true, operator: true }],
  ['devices/+/result', { device: false, observer: true, operator: true }],
  ['devices/+/infer/+', { device: false, observer: true, operator: true }],
  ['devices/cam-a/stream', { device: true, observer: true, operator: true }],
  ['devices/cam-b/stream', { device: false, observer: true, operator: true }],
  ['devices/+/stream', { device: false, observer: true, operator: true }],
  ['devices/cam-a/infer/normal', { device: true, observer: true, operator: true }], // its own namespace
  ['devices/cam-a/rpc/#', { device: true, observer: false, operator: true }], // MQTT 5 response topics
  ['devices/cam-b/rpc/#', { device: false, observer: false, operator: true }],
  ['bridge/+/status', { device: true, observer: true, operator: true }],
  ['bridge/#', { device: false, observer: true, operator: true }],
  ['$SYS/#', { device: false, observer: false, operator: true }],
  ['#', { device: false, observer: false, operator: true }],
];

const dir = tempDir();
let pki: Pki;
let h: Harness;
beforeAll(async () => {
  pki = makePki(dir.path);
  const authFile = `${dir.path}/auth.json`;
  await writeAuthFile(authFile, USERS);
  h = await startHarness({
    AUTH_FILE: authFile,
    ALLOW_ANONYMOUS: 'false',
    MQTT_TLS_PORT: '0',
    TLS_CERT_FILE: pki.serverCertFile,
    TLS_KEY_FILE: pki.serverKeyFile,
    MQTT_WS_PORT: '0',
  });
});
afterAll(async () => {
  await h?.close();
  dir.remove();
});

/** True when the publish is accepted (PUBACK, connection stays); false when the broker drops the client. */
async function publishAllowed(client: MqttClient, topic: string): Promise<boolean> {
  const closed = disconnectedWithin(client, 1000);
  const acked = client.publishAsync(topic, JSON.stringify(ask(`r-${Math.random()}`)), { qos: 1 }).then(
    () => true,
    () => false,
  );
  const result = await Promise.race([acked, closed.then((c) => (c ? false : null))]);
  client.end(true);
  return result === true;
}

describe('role × action matrix over TCP', () => {
  for (const role of Object.keys(LOGIN) as RoleName[]) {
    it(`${role}: subscriptions`, async () => {
      const client = await connectTcp(h.bridge.mqttPort, { ...LOGIN[role], clientId: `${LOGIN[role].clientId}.sub` });
      const granted = await subscribeGranted(
        client,
        SUBSCRIBE.map(([f]) => f),
      );
      expect(granted.map((g) => g !== 128)).toEqual(SUBSCRIBE.map(([, allowed]) => allowed[role]));
      await client.endAsync();
    });

    for (const [topic, allowed] of PUBLISH) {
      it(`${role}: publish ${topic} → ${allowed[role] ? 'allowed' : 'refused, disconnected'}`, async () => {
        const before = h.bridge.broker!.refusals.publish;
        const client = await connectTcp(h.bridge.mqttPort, { ...LOGIN[role], clientId: `${LOGIN[role].clientId}.pub` });
        expect(await publishAllowed(client, topic)).toBe(allowed[role]);
        expect(h.bridge.broker!.refusals.publish - before).toBe(allowed[role] ? 0 : 1);
      });
    }
  }

  it('refuses an observer will on a request topic at CONNECT', async () => {
    await expect(
      connectTcp(h.bridge.mqttPort, { ...LOGIN.observer, will: { topic: 'devices/cam-a/infer/high', payload: Buffer.from('x'), qos: 1, retain: false } }),
    ).rejects.toThrow(/Not authorized/i);
  });
});

describe('the same rules over TLS and WebSocket', () => {
  const transports = {
    tls: (options: object) => connectTls(h.bridge.broker!.tlsPort as number, { ca: pki.ca, ...options }),
    ws: (options: object) => connectWs(h.bridge.broker!.wsPort as number, options),
  };

  it('reports the bound TLS and WebSocket ports (MQTT_TLS_PORT=0, MQTT_WS_PORT=0)', () => {
    expect(h.bridge.broker!.tlsPort).toBeGreaterThan(0);
    expect(h.bridge.broker!.wsPort).toBeGreaterThan(0);
    expect(h.bridge.broker!.tlsPort).not.toBe(h.bridge.mqttPort);
  });

  for (const [name, connect] of Object.entries(transports)) {
    it(`${name}: wrong password and anonymous refused; the device and observer rules apply`, async () => {
      await expect(connect({ ...LOGIN.device, password: 'nope' })).rejects.toThrow(/Bad username or password/i);
      await expect(connect({ clientId: 'cam-a' })).rejects.toThrow(/Not authorized/i);

      const device = await connect({ ...LOGIN.device, clientId: `cam-a.${name}` });
      expect(await subscribeGranted(device, ['devices/cam-a/result', 'devices/cam-b/result', '#'])).toEqual([1, 128, 128]);
      expect(await publishAllowed(device, 'devices/cam-a/infer/low')).toBe(true);
      const device2 = await connect({ ...LOGIN.device, clientId: `cam-a.${name}2` });
      expect(await publishAllowed(device2, 'devices/cam-b/infer/low')).toBe(false);

      const observer = await connect({ ...LOGIN.observer, clientId: `scada-${name}` });
      expect(await subscribeGranted(observer, ['devices/+/result', '$SYS/#'])).toEqual([1, 128]);
      expect(await publishAllowed(observer, 'devices/cam-a/infer/low')).toBe(false);

      // The observer sees a device's reply, end to end through this transport.
      const watcher = await connect({ ...LOGIN.observer, clientId: `scada-${name}-w` });
      await watcher.subscribeAsync('devices/+/result', { qos: 1 });
      const seen = new Promise<string>((resolve) => watcher.on('message', (topic) => resolve(topic)));
      const operator = await connect({ ...LOGIN.operator, clientId: `ops-${name}` });
      await operator.publishAsync('devices/cam-z/infer/high', JSON.stringify(ask(`via-${name}`)), { qos: 1 });
      expect(await seen).toBe('devices/cam-z/result');
      await Promise.all([watcher.endAsync(), operator.endAsync()]);
    });
  }
});
