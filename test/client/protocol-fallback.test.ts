// A broker that speaks only MQTT 3.1.1 refuses an MQTT 5 CONNECT (CONNACK 0x84 Unsupported
// protocol version): the client asks again with 3.1.1 and works there, by id on the result
// topic. The "broker" is a TCP front that refuses version 5 and passes 3.1.1 to the bridge.
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import mqttPacket from 'mqtt-packet';
import { afterEach, describe, expect, it } from 'vitest';
import { BridgeClient } from '../../client/index.js';
import { startHarness, type Harness } from '../helpers/harness.js';

let h: Harness | undefined;
let front: Server | undefined;
afterEach(async () => {
  await new Promise((resolve) => (front ? front.close(resolve) : resolve(undefined)));
  await h?.close();
  h = front = undefined;
});

/** Reads the CONNECT; version 5 is refused, 3.1.1 is passed through to `port` (its bytes first). */
function onlyMqtt311(port: number, seen: number[]): Server {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    const parser = mqttPacket.parser({ protocolVersion: 5 });
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      parser.parse(chunk);
    };
    parser.once('packet', (packet: { cmd: string; protocolVersion?: number }) => {
      socket.off('data', onData);
      seen.push(packet.protocolVersion ?? 0);
      if (packet.protocolVersion === 5) {
        socket.end(mqttPacket.generate({ cmd: 'connack', reasonCode: 0x84, sessionPresent: false }, { protocolVersion: 5 }));
        return;
      }
      const upstream = connect(port, '127.0.0.1', () => upstream.write(head));
      socket.pipe(upstream).pipe(socket);
      upstream.on('error', () => socket.destroy());
      socket.on('error', () => upstream.destroy());
    });
    socket.on('data', onData);
  });
  server.on('close', () => sockets.forEach((s) => s.destroy()));
  return server;
}

describe('client protocol fallback', () => {
  it('connects with MQTT 3.1.1 to a broker that refuses MQTT 5, and is answered there', async () => {
    h = await startHarness({}, { latencyMs: 5 });
    const versions: number[] = [];
    front = onlyMqtt311(h.bridge.mqttPort, versions);
    await new Promise<void>((resolve) => front!.listen(0, '127.0.0.1', resolve));
    const client = await BridgeClient.connect({ url: `mqtt://127.0.0.1:${(front.address() as AddressInfo).port}`, deviceId: 'plc-1' });
    try {
      expect(versions).toEqual([5, 4]);
      expect(client.protocolVersion).toBe(4);
      expect(client.replyTopic).toBe('devices/plc-1/result');
      expect((await client.chat({ messages: [{ role: 'user', content: 'Speed?' }] })).content).toBe('sim answer to: Speed?');
    } finally {
      await client.close();
    }
  });
});
