// The client's ways in: mTLS with a device certificate, a username and password from
// AUTH_FILE (over TCP and WebSocket), and a refused login that fails connect() at once with
// the broker's reason.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BridgeClient, BridgeConnectError } from '../../client/index.js';
import { startHarness, type Harness } from '../helpers/harness.js';
import { makePki, tempDir, writeAuthFile, type Pki } from '../helpers/security.js';

const dir = tempDir('eab-client-login-');
let pki: Pki;
let h: Harness;
beforeAll(async () => {
  pki = makePki(dir.path);
  const authFile = `${dir.path}/auth.json`;
  await writeAuthFile(authFile, [{ username: 'cam-7', password: 'pw-cam-7-secret', role: 'device', device_id: 'cam-7' }]);
  h = await startHarness({
    AUTH_FILE: authFile,
    ALLOW_ANONYMOUS: 'false',
    MQTT_TLS_PORT: '0',
    MQTT_WS_PORT: '0',
    TLS_CERT_FILE: pki.serverCertFile,
    TLS_KEY_FILE: pki.serverKeyFile,
    TLS_CA_FILE: pki.caFile,
  });
});
afterAll(async () => {
  await h?.close();
  dir.remove();
});

const ask = { messages: [{ role: 'user' as const, content: 'Is the guard closed?' }] };

describe('client logins', () => {
  it('connects over mTLS with a device certificate, its CN the device id', async () => {
    const { cert, key } = pki.client('cam-tls');
    const client = await BridgeClient.connect({ url: `mqtts://localhost:${h.bridge.broker!.tlsPort}`, deviceId: 'cam-tls', ca: pki.ca, cert, key });
    try {
      expect((await client.chat(ask)).content).toBe('sim answer to: Is the guard closed?');
    } finally {
      await client.close();
    }
  });

  it('logs in with its AUTH_FILE credentials, and a wrong password fails connect at once with the CONNACK code', async () => {
    const url = `mqtt://127.0.0.1:${h.bridge.mqttPort}`;
    const client = await BridgeClient.connect({ url, deviceId: 'cam-7', username: 'cam-7', password: 'pw-cam-7-secret' });
    try {
      expect((await client.chat(ask)).ok).toBe(true);
    } finally {
      await client.close();
    }
    const started = Date.now();
    const refused = await BridgeClient.connect({ url, deviceId: 'cam-7', username: 'cam-7', password: 'wrong-password', connectTimeoutMs: 10_000 }).catch(
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(BridgeConnectError);
    expect((refused as BridgeConnectError).reasonCode).toBe(0x86); // MQTT 5: Bad user name or password
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('connects over WebSocket (ws://) as over TCP', async () => {
    const url = `ws://127.0.0.1:${h.bridge.broker!.wsPort}/mqtt`;
    const client = await BridgeClient.connect({ url, deviceId: 'cam-7', username: 'cam-7', password: 'pw-cam-7-secret' });
    try {
      expect((await client.chat(ask)).content).toBe('sim answer to: Is the guard closed?');
    } finally {
      await client.close();
    }
  });

  it('gives the last socket error when nothing listens', async () => {
    const err = await BridgeClient.connect({ url: 'mqtt://127.0.0.1:1', deviceId: 'cam-8', connectTimeoutMs: 1500 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BridgeConnectError);
    expect((err as Error).message).toMatch(/within 1500 ms \(last error: .*ECONNREFUSED/);
  });
});
