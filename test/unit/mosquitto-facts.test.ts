// Proves test/helpers/mosquitto.ts and the Mosquitto 2.0 + mqtt.js 5 behaviours that the
// bridge's external-broker mode is built on: shared subscriptions, a PUBACK held until
// admission, the broker's send window, device ACLs, and persistence across a broker restart.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import mqtt, { type IClientOptions, type IConnackPacket, type MqttClient } from 'mqtt';
import { generate, parser, type IPubackPacket, type Packet } from 'mqtt-packet';
import { afterEach, describe, expect, it } from 'vitest';
import { startMosquitto, type Mosquitto, type MosquittoOptions } from '../helpers/mosquitto.js';
import { eventually } from '../helpers/wait.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const uid = (): string => randomBytes(4).toString('hex');
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const waitUntil = (check: () => boolean, what: string, timeoutMs = 5000): Promise<void> => eventually(what, check, timeoutMs);

/** Waits until a counter has not moved for quietMs (the broker has sent all it will). */
async function settle(count: () => number, quietMs = 250): Promise<number> {
  let last = -1;
  while (last !== count()) {
    last = count();
    await sleep(quietMs);
  }
  return last;
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function broker(opts?: MosquittoOptions): Promise<Mosquitto> {
  const b = await startMosquitto(opts);
  cleanups.push(() => b.close());
  return b;
}

const sessionPresent = new WeakMap<MqttClient, boolean>();

async function client(url: string, opts: IClientOptions = {}): Promise<MqttClient> {
  const c = mqtt.connect(url, { protocolVersion: 5, reconnectPeriod: 0, ...opts });
  cleanups.push(() => void c.end(true));
  const connack = await new Promise<IConnackPacket>((resolve, reject) => {
    c.once('connect', resolve);
    c.once('error', reject);
  });
  c.on('error', () => {}); // later errors are asserted where they matter
  sessionPresent.set(c, connack.sessionPresent);
  return c;
}

interface Received {
  topic: string;
  payload: string;
  dup: boolean;
}

/**
 * A persistent-session client whose customHandleAcks (given before connect, so nothing the
 * broker sends on session resume escapes it) records each message and acks it with ack().
 */
async function sessionClient(url: string, clientId: string, ack: (r: Received) => number | undefined, more: IClientOptions = {}) {
  const received: Received[] = [];
  const c = await client(url, {
    clientId,
    clean: false,
    properties: { sessionExpiryInterval: 3600 },
    customHandleAcks: (topic, message, packet: { dup?: boolean }, done) => {
      const r = { topic, payload: message.toString(), dup: packet.dup === true };
      received.push(r);
      const code = ack(r);
      if (code !== undefined) done(code);
    },
    ...more,
  });
  return { c, received, sessionPresent: sessionPresent.get(c) };
}

// A bridge stand-in in its own process, so SIGKILL leaves no chance to send anything.
const CHILD = `
const { default: mqtt } = await import('mqtt');
const cfg = JSON.parse(process.env.CHILD_CFG);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\\n');
const c = mqtt.connect(cfg.url, { protocolVersion: 5, clientId: cfg.clientId, clean: false, reconnectPeriod: 0,
  properties: { sessionExpiryInterval: cfg.expiry },
  customHandleAcks: (topic, message, packet, done) => {
    out({ event: 'message', payload: message.toString(), dup: packet.dup === true });
    if (!cfg.ack) return; // PUBACK held: "admission" never finishes
    done(0);
    // The broker reads a connection in order: once this marker is acked, so was the message.
    c.publish('marker/' + cfg.clientId, 'x', { qos: 1 }, () => out({ event: 'acked' }));
  } });
c.on('connect', () => c.subscribe(cfg.filter, { qos: 1 }, () => out({ event: 'ready' })));
`;

interface ChildEvent {
  event: string;
  payload?: string;
  dup?: boolean;
}

async function childClient(cfg: { url: string; clientId: string; filter: string; ack: boolean; expiry: number }) {
  const proc: ChildProcess = spawn(process.execPath, ['--input-type=module', '-e', CHILD], {
    cwd: ROOT,
    env: { ...process.env, CHILD_CFG: JSON.stringify(cfg) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  cleanups.push(() => void proc.kill('SIGKILL'));
  const events: ChildEvent[] = [];
  createInterface({ input: proc.stdout! }).on('line', (line) => events.push(JSON.parse(line) as ChildEvent));
  const waitFor = async (event: string): Promise<ChildEvent> => {
    await waitUntil(() => events.some((e) => e.event === event), `child event ${event}`);
    return events.find((e) => e.event === event) as ChildEvent;
  };
  const kill = async (): Promise<void> => {
    const exit = once(proc, 'exit');
    proc.kill('SIGKILL');
    await exit;
  };
  await waitFor('ready');
  return { events, waitFor, kill };
}

describe('startMosquitto', () => {
  it('runs a private broker: free port, captured log, websockets, restart on the same port, idempotent close', async () => {
    const b = await startMosquitto({ websockets: true });
    try {
      expect(b.port).not.toBe(1883);
      expect(b.url).toBe(`mqtt://127.0.0.1:${b.port}`);
      expect(b.logs()).toMatch(/mosquitto version 2\.\d+\.\d+ running/);
      const c = await client(b.url);
      await c.endAsync();
      if (b.wsPort !== undefined) {
        const ws = await client(`ws://127.0.0.1:${b.wsPort}`);
        expect(ws.connected).toBe(true);
        await ws.endAsync();
      }
      await b.restart();
      const again = await client(`mqtt://127.0.0.1:${b.port}`);
      expect(again.connected).toBe(true);
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
    await sleep(300);
    expect(second.received).toEqual([]);
  });
});

describe('a. shared subscription', () => {
  it('gives each of 200 QoS 1 messages to exactly one of two members, and both get some', async () => {
    const b = await broker();
    const group = uid();
    const got = [new Map<string, number>(), new Map<string, number>()];
    for (const seen of got) {
      const c = await client(b.url);
      c.on('message', (_t, payload) => seen.set(payload.toString(), (seen.get(payload.toString()) ?? 0) + 1));
      await c.subscribeAsync(`$share/${group}/devices/+/infer/+`, { qos: 1 });
    }
    const pub = await client(b.url);
    await Promise.all(Array.from({ length: 200 }, (_, n) => pub.publishAsync(`devices/d${n}/infer/normal`, `m${n}`, { qos: 1 })));
    const [a, c] = got as [Map<string, number>, Map<string, number>];
    await waitUntil(() => a.size + c.size === 200, '200 deliveries');
    await sleep(200);
    for (let n = 0; n < 200; n += 1) expect((a.get(`m${n}`) ?? 0) + (c.get(`m${n}`) ?? 0)).toBe(1);
    expect(a.size).toBeGreaterThan(0);
    expect(c.size).toBeGreaterThan(0);
  });
});

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
    const b = await broker();
    const held: ((code: number) => void)[] = [];
    const seen: string[] = [];
    const c = await client(b.url, {
      customHandleAcks: (_topic, message, _packet, done) => {
        seen.push(message.toString());
        held.push((code) => done(code));
      },
    });
    const topic = `serial/${uid()}`;
    await c.subscribeAsync(topic, { qos: 1 });
    const pub = await client(b.url);
    for (const payload of ['m1', 'm2', 'm3']) await pub.publishAsync(topic, payload, { qos: 1 });
    await sleep(300); // all three are in the client's socket by now (window 20)
    expect(seen).toEqual(['m1']);
    held.shift()?.(0);
    await waitUntil(() => seen.length === 2, 'm2');
    await sleep(100);
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
    // Round robin still counts the offline member: two sentinels reach the other member at least once.
    await pub.publishAsync('shheld/a', 's1', { qos: 1 });
    await pub.publishAsync('shheld/a', 's2', { qos: 1 });
    await waitUntil(() => other.received.length > 0, 'a sentinel');
    await sleep(300);
    expect(other.received.map((r) => r.payload)).not.toContain('req');
    const resumed = await sessionClient(b.url, clientId, () => 0);
    await waitUntil(() => resumed.received.length > 0, 'redelivery');
    expect(resumed.received[0]).toEqual({ topic: 'shheld/a', payload: 'req', dup: true });
  });

  it('shared subscription: when the killed member\'s session expires, its unacked message is dropped, not passed on', async () => {
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
    await sleep(300);
    expect(resumed.received).toEqual([]);
  });
});

/** A bare MQTT client that never acks: counts the QoS 1 PUBLISHes the broker sends before it waits. */
async function unackedWindow(b: Mosquitto, protocolVersion: 4 | 5, receiveMaximum?: number, publish = 500) {
  const socket = netConnect(b.port, '127.0.0.1');
  cleanups.push(() => void socket.destroy());
  await once(socket, 'connect');
  const read = parser({ protocolVersion });
  const packets: Packet[] = [];
  read.on('packet', (p: Packet) => packets.push(p));
  socket.on('data', (chunk: Buffer) => read.parse(chunk));
  const topic = `window/${uid()}`;
  const properties = receiveMaximum === undefined ? undefined : { receiveMaximum };
  socket.write(generate({ cmd: 'connect', protocolId: 'MQTT', protocolVersion, clean: true, clientId: `w-${uid()}`, keepalive: 60, properties }, { protocolVersion }));
  await waitUntil(() => packets.some((p) => p.cmd === 'connack'), 'connack');
  socket.write(generate({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic, qos: 1 }] }, { protocolVersion }));
  await waitUntil(() => packets.some((p) => p.cmd === 'suback'), 'suback');
  const pub = await client(b.url);
  const pubacks = await Promise.all(Array.from({ length: publish }, (_, n) => pub.publishAsync(topic, `m${n}`, { qos: 1 })));
  const received = () => packets.filter((p) => p.cmd === 'publish').length;
  const unacked = await settle(received);
  // Acking everything shows how many the broker kept queued for this client.
  const ack = (p: Packet) => p.cmd === 'publish' && socket.write(generate({ cmd: 'puback', messageId: p.messageId ?? 0 }, { protocolVersion }));
  packets.forEach(ack);
  read.on('packet', ack);
  const total = await settle(received);
  return { unacked, total, publisherCodes: [...new Set(pubacks.map((p) => (p as IPubackPacket | undefined)?.reasonCode ?? 0))] };
}

describe('c. flow control: unacked QoS 1 messages Mosquitto sends one client before it waits', () => {
  it('defaults: max_inflight_messages 20 for MQTT 3.1.1 and for MQTT 5 without Receive Maximum; else Receive Maximum', async () => {
    const b = await broker();
    expect(await unackedWindow(b, 4)).toEqual({ unacked: 20, total: 500, publisherCodes: [0] });
    expect(await unackedWindow(b, 5)).toEqual({ unacked: 20, total: 500, publisherCodes: [0] });
    expect((await unackedWindow(b, 5, 100)).unacked).toBe(100);
    expect((await unackedWindow(b, 5, 1000)).unacked).toBe(500);
    expect((await unackedWindow(b, 5, 65535)).unacked).toBe(500);
  });

  it('past the window, max_queued_messages per client; beyond that QoS 1 messages are dropped while the publisher gets RC 0', async () => {
    const b = await broker({ maxQueued: 100 });
    expect(await unackedWindow(b, 5, 20)).toEqual({ unacked: 20, total: 120, publisherCodes: [0] });
  });
});

const BRIDGE_ACL = [
  '# devices (username = device id): publish own requests, read own results and MQTT 5 response topics',
  'pattern write devices/%u/infer/+',
  'pattern read devices/%u/result',
  'pattern read devices/%u/rpc/#',
  'user bridge',
  '# $share/edge-ai-bridge/devices/+/infer/+ is checked per message against its real topic',
  'topic read devices/+/infer/+',
  'topic write devices/+/result',
  'topic write devices/+/rpc/#',
  'topic readwrite bridge/#',
];
const USERS = { 'cam-1': 'p1', 'cam-2': 'p2', bridge: 'pb' };

// The device ACL itself is tested end to end with the bridge in test/e2e/external-acl.test.ts.
describe('d. device ACLs', () => {
  it('a "topic read $share/..." line alone lets the bridge subscribe but delivers nothing', async () => {
    const acl = BRIDGE_ACL.filter((l) => l !== 'topic read devices/+/infer/+').concat('topic read $share/edge-ai-bridge/devices/+/infer/+');
    const b = await broker({ users: USERS, acl });
    const bridge = await sessionClient(b.url, `bridge-${uid()}`, () => 0, { username: 'bridge', password: 'pb' });
    expect((await bridge.c.subscribeAsync('$share/edge-ai-bridge/devices/+/infer/+', { qos: 1 })).map((g) => g.qos)).toEqual([1]);
    const cam = await client(b.url, { username: 'cam-1', password: 'p1' });
    await cam.publishAsync('devices/cam-1/infer/normal', 'own', { qos: 1 });
    await sleep(300);
    expect(bridge.received).toEqual([]);
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
    await settle(() => on.received.length);
    expect(on.received.length).toBe(5);
    const back = await sessionClient(b.url, offlineId, () => 0);
    await waitUntil(() => back.received.length === 5, 'the offline member\'s share');
    const all = [...on.received, ...back.received].map((r) => r.payload).sort();
    expect(all).toEqual(Array.from({ length: 10 }, (_, n) => `m${n}`).sort());
  });
});
