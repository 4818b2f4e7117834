import { createServer, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectIdle, loopbackSource, resolveTarget } from '../../device-sim/idle.js';
import { startHarness, type Harness } from '../helpers/harness.js';
import { eventually, quietFor, waitUntil } from '../helpers/wait.js';

describe('loopbackSource', () => {
  const address = (index: number, perAddress?: number): string => loopbackSource(index, perAddress).localAddress;

  it('fills 127.0.0.2 first, then moves to the next address every perAddress connections', () => {
    expect(loopbackSource(0)).toEqual({ localAddress: '127.0.0.2', localPort: 20_000 });
    expect(loopbackSource(9_999)).toEqual({ localAddress: '127.0.0.2', localPort: 29_999 });
    expect(loopbackSource(10_000)).toEqual({ localAddress: '127.0.0.3', localPort: 20_000 });
    expect(loopbackSource(29_999)).toEqual({ localAddress: '127.0.0.4', localPort: 29_999 });
    expect(loopbackSource(5, 2)).toEqual({ localAddress: '127.0.0.4', localPort: 20_001 });
  });

  it('gives every connection its own (address, port) pair', () => {
    const seen = new Set(Array.from({ length: 25_000 }, (_, i) => JSON.stringify(loopbackSource(i, 7_000))));
    expect(seen.size).toBe(25_000);
  });

  it('carries into the higher octets, stays inside 127.0.0.0/8 and below port 65536', () => {
    expect(address(253, 1)).toBe('127.0.0.255');
    expect(address(254, 1)).toBe('127.0.1.0');
    expect(address(0xfffffe - 2, 1)).toBe('127.255.255.254');
    expect(loopbackSource(45_535, 45_536)).toEqual({ localAddress: '127.0.0.2', localPort: 65_535 });
    expect(() => loopbackSource(0xfffffe - 1, 1)).toThrow(RangeError);
    expect(() => loopbackSource(-1)).toThrow(RangeError);
    expect(() => loopbackSource(0, 0)).toThrow(RangeError);
    expect(() => loopbackSource(0, 45_537)).toThrow(RangeError);
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
    (h.bridge.broker!.aedes as unknown as { clients: Record<string, { conn: { remoteAddress?: string } }> }).clients;
  const settled = async (): Promise<number> => {
    await waitUntil(() => h.bridge.broker!.aedes.connectedClients === 0, 2000);
    return h.bridge.broker!.aedes.connectedClients;
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

    expect(h.bridge.broker!.aedes.connectedClients).toBe(600);
    const idle = Object.entries(clients()).filter(([id]) => id.startsWith('idl-idle-'));
    expect(idle).toHaveLength(600);
    const sources = new Set(idle.map(([, c]) => c.conn.remoteAddress));
    expect([...sources].sort()).toEqual(['127.0.0.2', '127.0.0.3', '127.0.0.4']);

    // The subscription is real: a reply on one idle device's result topic reaches that socket
    // (and only it), as a QoS 1 PUBLISH the device acknowledges.
    await h.bridge.broker!.publish('devices/idl-idle-437/result', Buffer.from('{"hello":1}'), { qos: 1, retain: false });
    await eventually('the reply on the idle device', () => received.length > 0, 2000);
    // No barrier reaches the 599 other sockets: a copy sent to any of them would be here by now.
    await quietFor(50);
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

  it('lets the kernel pick the source port when the chosen one is taken', async () => {
    // A listener on the first idle device's source endpoint makes its bind fail.
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(20_000, '127.0.0.2', resolve));
    try {
      const fleet = await connectIdle({ host: '127.0.0.1', port: h.bridge.mqttPort, count: 2, prefix: 'port' });
      expect(fleet).toMatchObject({ connected: 2, failed: 0 });
      const first = clients()['port-idle-1']?.conn as { remoteAddress?: string; remotePort?: number } | undefined;
      // Same source address, another port.
      expect(first?.remoteAddress).toBe('127.0.0.2');
      expect(first?.remotePort).not.toBe(20_000);
      await fleet.close();
      expect(await settled()).toBe(0);
    } finally {
      await new Promise<void>((resolve) => squatter.close(() => resolve()));
    }
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
