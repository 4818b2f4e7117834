// Mosquitto 2.0's send window per client (max_inflight_messages or Receive Maximum) and the
// queue behind it (max_queued_messages), read with a bare MQTT client that never acks.
import { once } from 'node:events';
import { connect as netConnect } from 'node:net';
import { generate, parser, type IPubackPacket, type Packet } from 'mqtt-packet';
import { afterEach, describe, expect, it } from 'vitest';
import type { Mosquitto } from '../helpers/mosquitto.js';
import { broker, client, closeAll, onCleanup, settle, uid, waitUntil } from '../helpers/mosquitto-clients.js';

afterEach(closeAll);

/** A bare MQTT client that never acks: counts the QoS 1 PUBLISHes the broker sends before it waits. */
async function unackedWindow(b: Mosquitto, protocolVersion: 4 | 5, receiveMaximum?: number, publish = 500) {
  const socket = netConnect(b.port, '127.0.0.1');
  onCleanup(() => void socket.destroy());
  await once(socket, 'connect');
  const read = parser({ protocolVersion });
  const packets: Packet[] = [];
  read.on('packet', (p: Packet) => packets.push(p));
  socket.on('data', (chunk: Buffer) => read.parse(chunk));
  const topic = `window/${uid()}`;
  const properties = receiveMaximum === undefined ? undefined : { receiveMaximum };
  socket.write(
    generate({ cmd: 'connect', protocolId: 'MQTT', protocolVersion, clean: true, clientId: `w-${uid()}`, keepalive: 60, properties }, { protocolVersion }),
  );
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
