// Hand-written MQTT 3.1.1 bytes over a plain socket, for clients that break the rules on
// purpose (no CONNECT, a huge announced length, withheld PUBREL, a stopped reader).
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { encodeLength } from '../../device-sim/mqtt-frames.js';

export const PacketType = {
  CONNECT: 1,
  CONNACK: 2,
  PUBLISH: 3,
  PUBACK: 4,
  PUBREC: 5,
  PUBREL: 6,
  PUBCOMP: 7,
  SUBSCRIBE: 8,
  SUBACK: 9,
  UNSUBSCRIBE: 10,
  UNSUBACK: 11,
  DISCONNECT: 14,
} as const;

export { encodeLength };

const str = (s: string): Buffer => {
  const body = Buffer.from(s, 'utf8');
  const len = Buffer.alloc(2);
  len.writeUInt16BE(body.length);
  return Buffer.concat([len, body]);
};
const u16 = (n: number): Buffer => {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
};

/** A fixed header: type byte (type << 4 | flags) and the remaining length. */
export const fixedHeader = (type: number, flags: number, remainingLength: number): Buffer =>
  Buffer.concat([Buffer.from([(type << 4) | flags]), encodeLength(remainingLength)]);

const packet = (type: number, flags: number, body: Buffer): Buffer => Buffer.concat([fixedHeader(type, flags, body.length), body]);

export function connectPacket(clientId: string, { keepalive = 60, clean = true } = {}): Buffer {
  const flags = clean ? 0x02 : 0;
  const body = Buffer.concat([str('MQTT'), Buffer.from([4, flags]), u16(keepalive), str(clientId)]);
  return packet(PacketType.CONNECT, 0, body);
}

export function publishPacket(topic: string, payload: Buffer | string, { qos = 0, messageId = 1 } = {}): Buffer {
  const parts = [str(topic)];
  if (qos > 0) parts.push(u16(messageId));
  parts.push(Buffer.isBuffer(payload) ? payload : Buffer.from(payload));
  return packet(PacketType.PUBLISH, qos << 1, Buffer.concat(parts));
}

export function subscribePacket(messageId: number, filters: string[], qos = 0): Buffer {
  const body = Buffer.concat([u16(messageId), ...filters.map((f) => Buffer.concat([str(f), Buffer.from([qos])]))]);
  return packet(PacketType.SUBSCRIBE, 0x02, body);
}

export function unsubscribePacket(messageId: number, filters: string[]): Buffer {
  return packet(PacketType.UNSUBSCRIBE, 0x02, Buffer.concat([u16(messageId), ...filters.map(str)]));
}

/** The return codes of a SUBACK, in order. */
export const subackCodes = (p: RawPacket): number[] => [...p.body.subarray(2)];

export interface RawPacket {
  type: number;
  flags: number;
  body: Buffer;
}

/** A raw MQTT connection that records every packet it receives and when it closed. */
export class RawClient {
  readonly packets: RawPacket[] = [];
  /** Resolves with the time (ms since epoch) the socket closed. */
  readonly closed: Promise<number>;
  isClosed = false;
  private buffer = Buffer.alloc(0);
  private readonly waiters = new Set<() => void>();

  private constructor(readonly socket: Socket) {
    socket.on('error', () => {}); // a reset from the broker is the expected outcome here
    this.closed = new Promise((resolve) =>
      socket.once('close', () => {
        this.isClosed = true;
        this.wake();
        resolve(Date.now());
      }),
    );
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
  }

  static async open(port: number): Promise<RawClient> {
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    return new RawClient(socket);
  }

  /** Opens, sends CONNECT and waits for an accepting CONNACK. */
  static async connected(port: number, clientId: string, options: { keepalive?: number } = {}): Promise<RawClient> {
    const raw = await RawClient.open(port);
    raw.send(connectPacket(clientId, options));
    const connack = await raw.next(PacketType.CONNACK);
    if (connack.body[1] !== 0) throw new Error(`CONNACK ${connack.body[1]}`);
    return raw;
  }

  send(bytes: Buffer): boolean {
    return this.socket.write(bytes);
  }

  /** The first received packet of this type not yet taken (waits for it). */
  async next(type: number, timeoutMs = 3000): Promise<RawPacket> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const index = this.packets.findIndex((p) => p.type === type);
      if (index >= 0) return this.packets.splice(index, 1)[0] as RawPacket;
      if (this.isClosed) throw new Error(`closed before packet type ${type}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no packet type ${type} within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, left);
        function done(): void {
          clearTimeout(timer);
          resolve();
        }
        this.waiters.add(done);
      });
    }
  }

  /** Resolves true once closed, false if still open after timeoutMs. */
  async closedWithin(timeoutMs: number): Promise<boolean> {
    const timer = new Promise<false>((resolve) => setTimeout(() => resolve(false), timeoutMs).unref());
    return Promise.race([this.closed.then(() => true as const), timer]);
  }

  destroy(): void {
    this.socket.destroy();
  }

  private wake(): void {
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const wake of waiters) wake();
  }

  private onData(chunk: Buffer): void {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    for (;;) {
      if (this.buffer.length < 2) break;
      let length = 0;
      let multiplier = 1;
      let offset = 1;
      let complete = false;
      while (offset < this.buffer.length && offset <= 4) {
        const byte = this.buffer[offset] as number;
        length += (byte & 0x7f) * multiplier;
        multiplier *= 128;
        offset += 1;
        if ((byte & 0x80) === 0) {
          complete = true;
          break;
        }
      }
      if (!complete || this.buffer.length < offset + length) break;
      const first = this.buffer[0] as number;
      this.packets.push({ type: first >> 4, flags: first & 0x0f, body: this.buffer.subarray(offset, offset + length) });
      this.buffer = this.buffer.subarray(offset + length);
    }
    this.wake();
  }
}
