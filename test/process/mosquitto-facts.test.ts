// Proves test/helpers/mosquitto.ts, and that Mosquitto 2.0 keeps persistent sessions and their
// queued QoS 1 messages across a clean restart (not a SIGKILL), shared-subscription members included.
import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { startMosquitto } from '../helpers/mosquitto.js';
import { broker, client, closeAll, echo, sessionClient, uid, waitUntil } from '../helpers/mosquitto-clients.js';

afterEach(closeAll);

describe('startMosquitto', () => {
  it('runs a private broker: free port, captured log, websockets, restart on the same port, idempotent close', async () => {
    const b = await startMosquitto({ websockets: true });
    try {
      expect(b.port).not.toBe(1883);
      expect(b.url).toBe(`mqtt://127.0.0.1:${b.port}`);
      expect(b.logs()).toMatch(/mosquitto version 2\.\d+\.\d+ running/);
      const c = await client(b.url);
      expect(await echo(c, 'tcp')).toBe('tcp');
      await c.endAsync();
      if (b.wsPort !== undefined) {
        const ws = await client(`ws://127.0.0.1:${b.wsPort}`);
        expect(await echo(ws, 'websockets')).toBe('websockets');
        await ws.endAsync();
      }
      await b.restart();
      const again = await client(`mqtt://127.0.0.1:${b.port}`);
      expect(await echo(again, 'after restart')).toBe('after restart');
      await again.endAsync();
    } finally {
      await b.close();
      await b.close();
    }
    expect(existsSync(b.dir)).toBe(false);
  });

  it('SIGKILL loses what was not saved: the db is written on a clean exit (or autosave) only', async () => {
    const b = await broker();
    const clientId = `kill-${uid()}`;
    const topic = `kill/${uid()}`;
    const first = await sessionClient(b.url, clientId, () => 0);
    await first.c.subscribeAsync(topic, { qos: 1 });
    await first.c.endAsync();
    const pub = await client(b.url);
    await pub.publishAsync(topic, 'queued', { qos: 1 });
    await b.stop('SIGKILL');
    await b.restart();
    const second = await sessionClient(b.url, clientId, () => 0);
    expect(second.sessionPresent).toBe(false); // session, subscription and queued message are gone
    // A barrier: a message of its own comes after anything the broker still had for the clientId.
    expect(await echo(second.c, 'barrier')).toBe('barrier');
    expect(second.received.map((r) => r.payload)).toEqual(['barrier']);
  });
});

describe('e. broker restart with a persistent shared-subscription member', () => {
  it('queues QoS 1 messages for the offline sole member and keeps them across a SIGTERM restart', async () => {
    const b = await broker();
    const clientId = `restart-${uid()}`;
    const dev = `d${uid()}`;
    const first = await sessionClient(b.url, clientId, () => 0);
    await first.c.subscribeAsync('$share/edge-ai-bridge/devices/+/infer/+', { qos: 1 });
    await first.c.endAsync();
    const pub = await client(b.url);
    for (let n = 0; n < 10; n += 1) await pub.publishAsync(`devices/${dev}/infer/normal`, `m${n}`, { qos: 1 });
    await pub.endAsync();
    await b.restart();
    expect(b.logs()).toMatch(/Saving in-memory database/);
    const resumed = await sessionClient(b.url, clientId, () => 0);
    expect(resumed.sessionPresent).toBe(true);
    await waitUntil(() => resumed.received.length === 10, '10 queued messages');
    expect(resumed.received.map((r) => r.payload)).toEqual(Array.from({ length: 10 }, (_, n) => `m${n}`));
    expect(resumed.received.every((r) => !r.dup)).toBe(true); // queued, never sent: not dup
  });

  it('round robin includes offline members: an online member gets only its turns, the rest wait for the offline one', async () => {
    const b = await broker();
    const group = uid();
    const filter = `$share/${group}/rr/+`;
    const offlineId = `rr-off-${uid()}`;
    const off = await sessionClient(b.url, offlineId, () => 0);
    await off.c.subscribeAsync(filter, { qos: 1 });
    await off.c.endAsync();
    const on = await sessionClient(b.url, `rr-on-${uid()}`, () => 0);
    await on.c.subscribeAsync(filter, { qos: 1 });
    const pub = await client(b.url);
    for (let n = 0; n < 10; n += 1) await pub.publishAsync('rr/a', `m${n}`, { qos: 1 });
    // A barrier: whatever the broker sent `on` of the ten came before its own echo.
    expect(await echo(on.c, 'barrier')).toBe('barrier');
    expect(on.received.filter((r) => r.topic === 'rr/a')).toHaveLength(5);
    const back = await sessionClient(b.url, offlineId, () => 0);
    await waitUntil(() => back.received.length === 5, "the offline member's share");
    const all = [...on.received, ...back.received]
      .filter((r) => r.topic === 'rr/a')
      .map((r) => r.payload)
      .sort();
    expect(all).toEqual(Array.from({ length: 10 }, (_, n) => `m${n}`).sort());
  });
});
