// mTLS: client certificates from TLS_CA_FILE are required; a certificate's CN (or its first
// DNS SAN) is the device id when no username is given; TLS before 1.2 is refused.
import { connect as tlsConnect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBroker } from '../../broker/broker.js';
import { ListenError } from '../../contract/index.js';
import { createLogger } from '../../bridge/logger.js';
import { loadConfig } from '../../bridge/config/config.js';
import { ask, startHarness, subscribeGranted, type Harness } from '../helpers/harness.js';
import { connectTls, disconnectedWithin, makePki, tempDir, writeAuthFile, type Pki } from '../helpers/security.js';

const dir = tempDir();
let pki: Pki;
let h: Harness;
beforeAll(async () => {
  pki = makePki(dir.path);
  const authFile = `${dir.path}/auth.json`;
  await writeAuthFile(authFile, [{ username: 'scada', password: 'pw-o', role: 'observer' }]);
  h = await startHarness({
    AUTH_FILE: authFile,
    ALLOW_ANONYMOUS: 'false',
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

const port = (): number => h.bridge.broker!.tlsPort as number;

describe('mTLS', () => {
  it('refuses a client without a certificate', async () => {
    const before = h.bridge.broker!.refusals.tls;
    await expect(connectTls(port(), { ca: pki.ca, clientId: 'cam-1' })).rejects.toThrow();
    expect(h.bridge.broker!.refusals.tls).toBeGreaterThan(before);
  });

  it('refuses a certificate from another CA', async () => {
    const before = h.bridge.broker!.refusals.tls;
    const other = pki.client('cam-1', { otherCa: true });
    await expect(connectTls(port(), { ca: pki.ca, ...other, clientId: 'cam-1' })).rejects.toThrow();
    expect(h.bridge.broker!.refusals.tls).toBeGreaterThan(before);
    expect(h.bridge.broker!.refusals.connect).toBe(0); // refused by TLS, before any MQTT
  });

  it("takes the device id from a good certificate's CN, and the device ACL applies", async () => {
    const cert = pki.client('cam-tls');
    await expect(connectTls(port(), { ca: pki.ca, ...cert, clientId: 'cam-other' })).rejects.toThrow(/Identifier rejected/i);
    const client = await connectTls(port(), { ca: pki.ca, ...cert, clientId: 'cam-tls.sub' });
    expect(await subscribeGranted(client, ['devices/cam-tls/result', 'devices/cam-x/result', 'bridge/+/status'])).toEqual([1, 128, 1]);
    const reply = new Promise<string>((resolve) =>
      client.on('message', (topic, payload) => topic.startsWith('devices/') && resolve(`${topic} ${payload.toString()}`)),
    );
    await client.publishAsync('devices/cam-tls/infer/high', JSON.stringify(ask('over-mtls')), { qos: 1 });
    expect(await reply).toMatch(/^devices\/cam-tls\/result .*"id":"over-mtls"/);

    const before = h.bridge.broker!.refusals.publish;
    const forger = await connectTls(port(), { ca: pki.ca, ...cert, clientId: 'cam-tls.pub' });
    const closed = disconnectedWithin(forger, 2000);
    forger.publish('devices/cam-x/infer/high', JSON.stringify(ask('forged')), { qos: 1 });
    expect(await closed).toBe(true);
    expect(h.bridge.broker!.refusals.publish).toBe(before + 1);
    forger.end(true);
    await client.endAsync();
  });

  it('uses the first DNS SAN of a certificate without a CN', async () => {
    const cert = pki.client('cam-san', { sanOnly: true });
    const client = await connectTls(port(), { ca: pki.ca, ...cert, clientId: 'cam-san' });
    expect(await subscribeGranted(client, ['devices/cam-san/result', 'devices/cam-tls/result'])).toEqual([1, 128]);
    await client.endAsync();
  });

  it('a username with a certificate logs in as that user (here an observer)', async () => {
    const cert = pki.client('cam-tls');
    const client = await connectTls(port(), { ca: pki.ca, ...cert, clientId: 'scada-1', username: 'scada', password: 'pw-o' });
    expect(await subscribeGranted(client, ['devices/+/result'])).toEqual([1]);
    await client.endAsync();
    await expect(connectTls(port(), { ca: pki.ca, ...cert, clientId: 'cam-tls', username: 'scada', password: 'x' })).rejects.toThrow(
      /Bad username or password/i,
    );
  });

  it('refuses a TLS 1.1 client with a protocol-version alert', async () => {
    const cert = pki.client('cam-old');
    const err = await new Promise<Error>((resolve) => {
      const socket = tlsConnect({
        host: '127.0.0.1',
        port: port(),
        ca: pki.ca,
        ...cert,
        minVersion: 'TLSv1.1',
        maxVersion: 'TLSv1.1',
        ciphers: 'DEFAULT@SECLEVEL=0',
      });
      socket.once('secureConnect', () => {
        socket.destroy();
        resolve(new Error('connected'));
      });
      socket.once('error', resolve);
    });
    expect(err.message).toMatch(/protocol version|unsupported protocol/i);
    expect(err.message).not.toBe('connected');
  });
});

describe('TLS listener errors', () => {
  it('a busy MQTT_TLS_PORT is a ListenError naming it', async () => {
    const busy = h.bridge.broker!.tlsPort as number;
    const config = {
      ...loadConfig({}),
      mqttHost: '127.0.0.1',
      mqttPort: 0,
      allowAnonymous: true,
      maxConnections: 10,
      connectTimeoutMs: 5000,
      keepaliveLimitS: 60,
      drainTimeoutMs: 5000,
      maxInflightQos2: 10,
      mqttTlsPort: busy,
      tlsCertFile: pki.serverCertFile,
      tlsKeyFile: pki.serverKeyFile,
    };
    const error = await startBroker(config, async () => {}, createLogger('silent')).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ListenError);
    expect((error as ListenError).variable).toBe('MQTT_TLS_PORT');
  });
});
