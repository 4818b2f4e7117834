import { createServer, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectIdle, loopbackSource, resolveTarget } from '../../device-sim/idle.js';
import { sleep, startHarness, type Harness } from '../helpers/harness.js';

describe('loopbackSource', () => {
  it('fills 127.0.0.2 first, then moves to the next address every perAddress connections', () => {
    expect(loopbackSource(0)).toBe('127.0.0.2');
    expect(loopbackSource(9_999)).toBe('127.0.0.2');
    expect(loopbackSource(10_000)).toBe('127.0.0.3');
    expect(loopbackSource(29_999)).toBe('127.0.0.4');
    expect(loopbackSource(5, 2)).toBe('127.0.0.4');
  });

  it('carries into the higher octets and stays inside 127.0.0.0/8', () => {
    expect(loopbackSource(253, 1)).toBe('127.0.0.255');
    expect(loopbackSource(254, 1)).toBe('127.0.1.0');
    expect(loopbackSource(0xfffffe - 2, 1)).toBe('127.255.255.254');
    expect(() => loopbackSource(0xfffffe - 1, 1)).toThrow(RangeError);
    expect(() => loopbackSource(-1)).toThrow(RangeError);
    expect(() => loopbackSource(0, 0)).toThrow(RangeError);
  });

  it('spreads only for a loopback broker', async () => {
    expect(await resolveTarget('127.0.0.1')).toEqual({ address: '127.0.0.1', spread: true });
    expect(await resolveTarget('127.5.6.7')).toEqual({ address: '127.5.6.7', spread: true });
    expect(await resolveTarget('10.1.2.3')).toEqual({ address: '10.1.2.3', spread: false });
    expect(await resolveTarget('::1')).toEqual({ address: '::1', spread: false });
  });
});

describe('idle devices (connectIdle) against the bridge', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h.close();
  });

  // Aedes' types omit its client table.
  const clients = (): Record<string, { conn: { remoteAddress?: string } }> =>
    (h.bridge.broker.aedes as unknown as { clients: Record<string, { conn: { remoteAddress?: string } }> }).clients;
  const settled = async (): Promise<number> => {
    for (let i = 0; i < 100 && h.bridge.broker.aedes.connectedClients > 0; i++) await sleep(20);
    return h.bridge.broker.aedes.connectedClients;
  };

  it('holds 600 idle devices, subscribed, from several loopback source addresses, and lets them go on close()', async () => {
    const received: Array<{ clientId: string; topic: string; payload: string }> = [];
    const progress: number[] = [];
    const fleet = await connectIdle({
      host: '127.0.0.1',
      port: h.bridge.mqttPort,
      count: 600,
      prefix: 'idl',
      perSourceAddress: 250,
      onProgress: (n) => progress.push(n),
      onMessage: (clientId, topic, payload) => received.push({ clientId, topic, payload: payload.toString() }),
    });
    expect(fleet).toMatchObject({ connected: 600, failed: 0, dropped: 0 });
    expect(fleet.firstError).toBeUndefined();
    expect(progress.at(-1)).toBe(600);

    expect(h.bridge.broker.aedes.connectedClients).toBe(600);
    const idle = Object.entries(clients()).filter(([id]) => id.startsWith('idl-idle-'));
    expect(idle).toHaveLength(600);
    const sources = new Set(idle.map(([, c]) => c.conn.remoteAddress));
    expect([...sources].sort()).toEqual(['127.0.0.2', '127.0.0.3', '127.0.0.4']);

    // The subscription is real: a reply on one idle device's result topic reaches that socket
    // (and only it), as a QoS 1 PUBLISH the device acknowledges.
    await h.bridge.broker.publish('devices/idl-idle-437/result', Buffer.from('{"hello":1}'), { qos: 1, retain: false });
    for (let i = 0; i < 100 && received.length === 0; i++) await sleep(20);
    await sleep(50);
    expect(received).toEqual([{ clientId: 'idl-idle-437', topic: 'devices/idl-idle-437/result', payload: '{"hello":1}' }]);

    await fleet.close();
    expect(await settled()).toBe(0);
    expect(fleet.dropped).toBe(0);
  });

  it('counts refused devices instead of throwing, keeping the first reason', async () => {
    // "bad.x-idle-n" is a valid client id, but device "bad" may not subscribe to devices/bad.x-idle-n/result.
    const refused = await connectIdle({ host: '127.0.0.1', port: h.bridge.mqttPort, count: 3, prefix: 'bad.x' });
    expect(refused).toMatchObject({ connected: 0, failed: 3 });
    expect(refused.firstError).toMatch(/^bad\.x-idle-\d: subscription to devices\/bad\.x-idle-\d\/result refused$/);
    await refused.close();

    const rejected = await connectIdle({ host: '127.0.0.1', port: h.bridge.mqttPort, count: 2, prefix: 'no/slash' });
    expect(rejected).toMatchObject({ connected: 0, failed: 2 });
    expect(rejected.firstError).toMatch(/CONNACK return code 2/);
    await rejected.close();
    expect(await settled()).toBe(0);
  });

  it('counts devices that cannot connect at all', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const fleet = await connectIdle({ host: '127.0.0.1', port, count: 5, concurrency: 2 });
    expect(fleet).toMatchObject({ connected: 0, failed: 5 });
    expect(fleet.firstError).toMatch(/^sim-idle-\d: .*ECONNREFUSED/);
    await fleet.close();
  });
});
