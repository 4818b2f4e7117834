// Mosquitto 2.0 + mqtt.js 5 facts the bridge's external-broker mode is built on: a PUBACK held
// until admission keeps the message the broker's until acked, shared subscriptions included.
import { afterEach, describe, expect, it } from 'vitest';
import { broker, childClient, client, closeAll, echo, sessionClient, uid, waitUntil } from '../helpers/mosquitto-clients.js';
import { quietFor } from '../helpers/wait.js';

afterEach(closeAll);

describe('b. PUBACK held until admission (mqtt.js customHandleAcks)', () => {
  it('a message whose PUBACK was never sent is redelivered (dup) to the same clientId after SIGKILL, before any subscribe()', async () => {
    const b = await broker();
    const clientId = `held-${uid()}`;
    const child = await childClient({ url: b.url, clientId, filter: `held/${clientId}/+`, ack: false, expiry: 3600 });
    const pub = await client(b.url);
    await pub.publishAsync(`held/${clientId}/normal`, 'req-1', { qos: 1 });
    expect(await child.waitFor('message')).toEqual({ event: 'message', payload: 'req-1', dup: false });
    await child.kill();
    // No subscribe() here: the session's subscription and its unacked message come back on CONNECT.
    const resumed = await sessionClient(b.url, clientId, () => 0);
    expect(resumed.sessionPresent).toBe(true);
    await waitUntil(() => resumed.received.length > 0, 'redelivery');
    expect(resumed.received).toEqual([{ topic: `held/${clientId}/normal`, payload: 'req-1', dup: true }]);
  });

  it('done(0x97) sends PUBACK RC 151 and no message event; a code outside the list sends no PUBACK at all', async () => {
    const b = await broker({ verbose: true });
    const clientId = `codes-${uid()}`;
    const topic = `codes/${clientId}`;
    const codes: Record<string, number> = { ok: 0, reject: 0x97, bad: 0x8f };
    const first = await sessionClient(b.url, clientId, (r) => codes[r.payload]);
    const messages: string[] = [];
    const errors: string[] = [];
    first.c.on('message', (_t, payload) => messages.push(payload.toString()));
    first.c.on('error', (error) => errors.push(error.message));
    await first.c.subscribeAsync(topic, { qos: 1 });
    const pub = await client(b.url);
    for (const payload of ['ok', 'reject', 'bad']) await pub.publishAsync(topic, payload, { qos: 1 });
    await waitUntil(() => errors.length > 0, 'error for 0x8f');
    expect(errors).toEqual(['Wrong reason code for puback']);
    expect(messages).toEqual(['ok']);
    await waitUntil(() => /Received PUBACK from \S+ \(Mid: 2, RC:151\)/.test(b.logs()), 'PUBACK RC 151 in the log');
    expect(b.logs()).toMatch(/Received PUBACK from \S+ \(Mid: 1, RC:0\)/);
    expect(b.logs()).not.toMatch(/Received PUBACK from \S+ \(Mid: 3/);
    await first.c.endAsync();
    // A negative PUBACK still ends the QoS 1 flow: only the unacked 'bad' comes back.
    const second = await sessionClient(b.url, clientId, () => 0);
    await pub.publishAsync(topic, 'sentinel', { qos: 1 });
    await waitUntil(() => second.received.some((r) => r.payload === 'sentinel'), 'sentinel');
    expect(second.received.map((r) => `${r.payload}${r.dup ? '(dup)' : ''}`)).toEqual(['bad(dup)', 'sentinel']);
  });

  it('mqtt.js handles incoming packets one at a time: while done is held, the next message is not handed over', async () => {
    const b = await broker({ verbose: true });
    const held: ((code: number) => void)[] = [];
    const seen: string[] = [];
    const clientId = `serial-${uid()}`;
    const c = await client(b.url, {
      clientId,
      customHandleAcks: (_topic, message, _packet, done) => {
        seen.push(message.toString());
        held.push((code) => done(code));
      },
    });
    const topic = `serial/${uid()}`;
    await c.subscribeAsync(topic, { qos: 1 });
    const pub = await client(b.url);
    for (const payload of ['m1', 'm2', 'm3']) await pub.publishAsync(topic, payload, { qos: 1 });
    // The broker has sent all three (window 20); nothing the client does can show it has read
    // them without handing them over: a quiet moment for its socket.
    await waitUntil(() => new RegExp(`Sending PUBLISH to ${clientId} \\(d0, q1, r0, m3,`).test(b.logs()), 'm3 sent');
    await quietFor(100);
    expect(seen).toEqual(['m1']);
    held.shift()?.(0);
    await waitUntil(() => seen.length === 2, 'm2');
    await quietFor(100); // m3 is in the socket already: handed over now, were m2 not held
    expect(seen).toEqual(['m1', 'm2']);
    held.shift()?.(0);
    await waitUntil(() => seen.length === 3, 'm3');
    held.shift()?.(0);
  });

  it('shared subscription: a killed member keeps its unacked message; the other member never gets it, the same clientId does', async () => {
    const b = await broker();
    const group = uid();
    const filter = `$share/${group}/shheld/+`;
    const clientId = `shheld-${uid()}`;
    const child = await childClient({ url: b.url, clientId, filter, ack: false, expiry: 3600 });
    const pub = await client(b.url);
    await pub.publishAsync('shheld/a', 'req', { qos: 1 });
    await child.waitFor('message');
    const other = await sessionClient(b.url, `other-${uid()}`, () => 0);
    await other.c.subscribeAsync(filter, { qos: 1 });
    await child.kill();
    // The broker has seen the member go: had it passed 'req' on then, that would come before the sentinels.
    await waitUntil(() => b.logs().includes(`Client ${clientId} closed its connection`), 'the member gone');
    // Round robin still counts the offline member: two sentinels reach the other member at least once.
    await pub.publishAsync('shheld/a', 's1', { qos: 1 });
    await pub.publishAsync('shheld/a', 's2', { qos: 1 });
    await waitUntil(() => other.received.length > 0, 'a sentinel');
    expect(other.received.map((r) => r.payload)).not.toContain('req');
    const resumed = await sessionClient(b.url, clientId, () => 0);
    await waitUntil(() => resumed.received.length > 0, 'redelivery');
    expect(resumed.received[0]).toEqual({ topic: 'shheld/a', payload: 'req', dup: true });
  });

  it("shared subscription: when the killed member's session expires, its unacked message is dropped, not passed on", async () => {
    const b = await broker();
    const group = uid();
    const filter = `$share/${group}/shexp/+`;
    const clientId = `shexp-${uid()}`;
    const child = await childClient({ url: b.url, clientId, filter, ack: false, expiry: 1 });
    const pub = await client(b.url);
    await pub.publishAsync('shexp/a', 'req', { qos: 1 });
    await child.waitFor('message');
    const other = await sessionClient(b.url, `other-${uid()}`, () => 0);
    await other.c.subscribeAsync(filter, { qos: 1 });
    await child.kill();
    await waitUntil(() => b.logs().includes(`Expiring client ${clientId} due to timeout`), 'session expiry', 6000);
    await pub.publishAsync('shexp/a', 's1', { qos: 1 });
    await pub.publishAsync('shexp/a', 's2', { qos: 1 });
    await waitUntil(() => other.received.length === 2, 'both sentinels (the expired member left the group)');
    expect(other.received.map((r) => r.payload)).toEqual(['s1', 's2']);
    const resumed = await sessionClient(b.url, clientId, () => 0);
    expect(resumed.sessionPresent).toBe(false);
    // A barrier: a message of its own, after anything the broker still had for the clientId.
    expect(await echo(resumed.c, 'barrier')).toBe('barrier');
    expect(resumed.received.map((r) => r.payload)).toEqual(['barrier']);
  });
});
