// Protocol-level limits: each test has one raw-socket client break a limit while a
// well-behaved mqtt.js device beside it keeps getting its replies.
import { afterEach, describe, expect, it } from 'vitest';
import { ask, startHarness, type Harness } from '../helpers/harness.js';
import { fixedHeader, PacketType, publishPacket, RawClient, subackCodes, subscribePacket, unsubscribePacket, connectPacket } from '../helpers/raw-mqtt.js';
import { waitUntil } from '../helpers/wait.js';

let h: Harness | undefined;
const raws: RawClient[] = [];

async function harness(env: Record<string, string>): Promise<Harness> {
  h = await startHarness(env);
  return h;
}

afterEach(async () => {
  for (const raw of raws.splice(0)) raw.destroy();
  await h?.close();
  h = undefined;
});

async function raw(port: number, clientId?: string, options: { keepalive?: number } = {}): Promise<RawClient> {
  const client = clientId === undefined ? await RawClient.open(port) : await RawClient.connected(port, clientId, options);
  raws.push(client);
  return client;
}

/** The well-behaved device asks and gets an ok reply. */
async function stillServed(harness: Harness, deviceId: string, id: string): Promise<void> {
  const device = await harness.device(deviceId);
  await device.publish('high', ask(id));
  const [reply] = await device.reply(id, { timeoutMs: 3000 });
  expect(reply?.ok).toBe(true);
}

/** Whether Aedes still has a client with this id. */
const hasClient = (harness: Harness, clientId: string): boolean =>
  (harness.bridge.broker!.aedes as unknown as { clients: Record<string, unknown> }).clients[clientId] !== undefined;

const until = (check: () => boolean, timeoutMs: number): Promise<boolean> => waitUntil(check, timeoutMs);

describe('protocol limits', () => {
  it('CONNECT_TIMEOUT_MS: closes a socket that sends no CONNECT', async () => {
    const b = await harness({ CONNECT_TIMEOUT_MS: '300' });
    const opened = Date.now();
    const silent = await raw(b.bridge.mqttPort);
    await stillServed(b, 'cam-good', 'ct-1');
    expect(await silent.closedWithin(2000)).toBe(true);
    const elapsed = (await silent.closed) - opened;
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(1500);
    await stillServed(b, 'cam-good2', 'ct-2');
  });

  it('KEEPALIVE_LIMIT_S: refuses a CONNECT asking for a longer keep-alive', async () => {
    const b = await harness({ KEEPALIVE_LIMIT_S: '60' });
    const greedy = await raw(b.bridge.mqttPort);
    greedy.send(connectPacket('cam-greedy', { keepalive: 120 }));
    const connack = await greedy.next(PacketType.CONNACK);
    expect(connack.body[1]).not.toBe(0);
    expect(await greedy.closedWithin(1000)).toBe(true);
    // At the limit is fine.
    const ok = await raw(b.bridge.mqttPort, 'cam-ok', { keepalive: 60 });
    expect(ok.isClosed).toBe(false);
    await stillServed(b, 'cam-good', 'ka-1');
  });

  it('MAX_PAYLOAD_BYTES: drops a packet announcing 50 MB after its first bytes, before buffering it', async () => {
    const b = await harness({});
    const big = await raw(b.bridge.mqttPort, 'cam-big');
    const before = process.memoryUsage().arrayBuffers;
    const announced = 50 * 1024 * 1024;
    const started = Date.now();
    big.send(fixedHeader(PacketType.PUBLISH, 0, announced));
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    let sent = 0;
    while (!big.isClosed && sent < announced && Date.now() - started < 3000) {
      sent += chunk.length;
      if (!big.send(chunk)) await Promise.race([new Promise((r) => big.socket.once('drain', r)), big.closed]);
    }
    expect(big.isClosed || (await big.closedWithin(1000))).toBe(true);
    expect(Date.now() - started).toBeLessThan(2000);
    // Only what the kernel buffers held before the reset: a few MB at most, never the 50 MB.
    expect(sent).toBeLessThan(10 * 1024 * 1024);
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(25 * 1024 * 1024);
    expect(b.upstream.requests).toEqual([]);

    // A request just over MAX_PAYLOAD_BYTES (within the packet cap) still gets its error reply.
    const device = await b.device('cam-good');
    await device.publish('high', ask('too-big', 'y'.repeat(300_000)));
    const [reply] = await device.reply('too-big');
    expect(reply).toMatchObject({ ok: false, error: { code: 'payload_too_large' } });
    await stillServed(b, 'cam-good2', 'ps-1');
  });

  it('topic levels: disconnects a client publishing to a 200-level topic', async () => {
    const b = await harness({});
    const deep = await raw(b.bridge.mqttPort, 'cam-deep');
    const topic = `devices/cam-deep/infer/${Array.from({ length: 197 }, () => 'a').join('/')}`;
    expect(topic.split('/')).toHaveLength(200);
    deep.send(publishPacket(topic, '{}', { qos: 1, messageId: 1 }));
    expect(await deep.closedWithin(1000)).toBe(true);
    await stillServed(b, 'cam-good', 'tl-1');
  });

  it('MAX_SUBSCRIPTIONS: refuses the 4th subscription with SUBACK 128; unsubscribing frees a slot', async () => {
    const b = await harness({ MAX_SUBSCRIPTIONS: '3' });
    const refusedBefore = b.bridge.broker!.refusals.subscribe;
    const subs = await raw(b.bridge.mqttPort, 'cam-subs');
    subs.send(subscribePacket(1, ['devices/cam-subs/result', 'bridge/+/status', 'bridge/a/status', 'bridge/b/status'], 1));
    expect(subackCodes(await subs.next(PacketType.SUBACK))).toEqual([1, 1, 1, 128]);
    expect(b.bridge.broker!.refusals.subscribe).toBe(refusedBefore + 1);
    // Subscribing again to a granted filter takes no new slot.
    subs.send(subscribePacket(2, ['bridge/a/status'], 1));
    expect(subackCodes(await subs.next(PacketType.SUBACK))).toEqual([1]);
    subs.send(unsubscribePacket(3, ['bridge/a/status']));
    await subs.next(PacketType.UNSUBACK);
    subs.send(subscribePacket(4, ['bridge/b/status', 'bridge/c/status'], 1));
    expect(subackCodes(await subs.next(PacketType.SUBACK))).toEqual([1, 128]);
    expect(subs.isClosed).toBe(false);
    await stillServed(b, 'cam-good', 'ms-1');
    // A new connection starts with no subscriptions counted.
    subs.destroy();
    await subs.closed;
    await until(() => !hasClient(b, 'cam-subs'), 1000);
    const again = await raw(b.bridge.mqttPort, 'cam-subs');
    again.send(subscribePacket(1, ['devices/cam-subs/result', 'bridge/+/status', 'bridge/a/status'], 1));
    expect(subackCodes(await again.next(PacketType.SUBACK))).toEqual([1, 1, 1]);
  });

  it('MAX_INFLIGHT_QOS2: disconnects a client holding more QoS 2 messages without PUBREL', async () => {
    const b = await harness({ MAX_INFLIGHT_QOS2: '5' });
    const holder = await raw(b.bridge.mqttPort, 'cam-q2');
    for (let id = 1; id <= 5; id += 1) {
      holder.send(publishPacket('devices/cam-q2/infer/low', JSON.stringify(ask(`q2-${id}`)), { qos: 2, messageId: id }));
    }
    for (let id = 1; id <= 5; id += 1) await holder.next(PacketType.PUBREC);
    expect(await holder.closedWithin(200)).toBe(false);
    holder.send(publishPacket('devices/cam-q2/infer/low', JSON.stringify(ask('q2-6')), { qos: 2, messageId: 6 }));
    expect(await holder.closedWithin(1000)).toBe(true);
    await stillServed(b, 'cam-good', 'q2-good');
  });

  it('a PUBREL sent twice in one segment gets two PUBCOMPs and the broker stays up', async () => {
    // Aedes 2.0.0-beta.1 let the second release's "no such packet" escape as an unhandled
    // rejection, ending the process (broker/inbound-qos2.ts).
    const b = await harness({});
    const client = await raw(b.bridge.mqttPort, 'cam-rel');
    client.send(publishPacket('devices/cam-rel/infer/low', JSON.stringify(ask('rel-1')), { qos: 2, messageId: 9 }));
    await client.next(PacketType.PUBREC);
    const pubrel = Buffer.concat([fixedHeader(PacketType.PUBREL, 0x02, 2), Buffer.from([0, 9])]);
    client.send(Buffer.concat([pubrel, pubrel]));
    await client.next(PacketType.PUBCOMP);
    await client.next(PacketType.PUBCOMP);
    expect(client.isClosed).toBe(false);
    await stillServed(b, 'cam-good', 'rel-good');
  });

  it('client ids and filters named like Object.prototype members leave the broker up', async () => {
    // GHSA-52qw-whmv-87c5 is not fixed in Aedes 2.0.0-beta.1: each of these ended the process.
    const b = await harness({});
    const odd = await raw(b.bridge.mqttPort, 'constructor');
    odd.send(unsubscribePacket(1, ['toString', 'constructor', '__proto__']));
    await odd.next(PacketType.UNSUBACK);
    odd.send(subscribePacket(2, ['hasOwnProperty'], 0));
    expect(subackCodes(await odd.next(PacketType.SUBACK))).toEqual([128]);
    const again = await raw(b.bridge.mqttPort, 'toString');
    // Aedes 2 beta's SUBSCRIBE dedupe (a plain object) turns `__proto__` into garbage entries
    // and drops the connection; that is all it may do.
    again.send(subscribePacket(1, ['__proto__'], 0));
    await again.closedWithin(500);
    await stillServed(b, 'cam-good', 'proto-good');
  });

  /** Subscribes a raw client to its result topic, then stops reading from the socket. */
  async function stalledSubscriber(b: Harness, deviceId: string): Promise<RawClient> {
    const slow = await raw(b.bridge.mqttPort, deviceId);
    slow.send(subscribePacket(1, [`devices/${deviceId}/result`], 0));
    expect(subackCodes(await slow.next(PacketType.SUBACK))).toEqual([0]);
    slow.socket.pause();
    return slow;
  }

  /** Floods the topic without waiting (a stalled subscriber holds each publish back). */
  function flood(b: Harness, topic: string, count: number, bytes: number): void {
    const payload = Buffer.alloc(bytes, 0x62);
    for (let i = 0; i < count; i += 1) b.bridge.broker!.publish(topic, payload, { qos: 0, retain: false }).catch(() => {});
  }

  it('MAX_CLIENT_BACKLOG_BYTES: drops a subscriber that stopped reading once its backlog is over the limit', async () => {
    const b = await harness({ MAX_CLIENT_BACKLOG_BYTES: '65536', DRAIN_TIMEOUT_MS: '60000' });
    await stalledSubscriber(b, 'cam-slow');
    const started = Date.now();
    flood(b, 'devices/cam-slow/result', 64, 256 * 1024); // 16 MB, more than the kernel buffers hold
    expect(await until(() => !hasClient(b, 'cam-slow'), 3000)).toBe(true);
    expect(Date.now() - started).toBeLessThan(3000); // long before the 60 s drain timeout
    await stillServed(b, 'cam-good', 'bl-1');
  });

  it('DRAIN_TIMEOUT_MS: drops a subscriber whose socket stays full, while another device keeps its replies', async () => {
    const b = await harness({ DRAIN_TIMEOUT_MS: '300', MAX_CLIENT_BACKLOG_BYTES: String(1024 * 1024 * 1024) });
    await stalledSubscriber(b, 'cam-slow');
    const device = await b.device('cam-good');
    flood(b, 'devices/cam-slow/result', 64, 256 * 1024);
    await device.publish('high', ask('dt-1'));
    expect((await device.reply('dt-1', { timeoutMs: 3000 }))[0]?.ok).toBe(true);
    expect(await until(() => !hasClient(b, 'cam-slow'), 3000)).toBe(true);
    await stillServed(b, 'cam-good2', 'dt-2');
  });
});
