// An MQTT connection built from mqtt-packet and a socket, for attackers: it sends whatever it
// is given (wildcards in a publish topic, any property, any bytes), which a well-behaved
// client library refuses to. It acknowledges what it receives unless told to stop reading.
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import * as mqttPacket from 'mqtt-packet';

export class Wire {
  /** Resolves when the socket closed (by either side). */
  readonly closed: Promise<void>;
  isClosed = false;
  /** Called with every PUBLISH the broker delivers. */
  onPublish: (packet: mqttPacket.IPublishPacket) => void = () => undefined;
  private nextId = 1;
  private readonly waiters = new Map<string, (packet: mqttPacket.Packet) => void>();
  private readonly parser: ReturnType<typeof mqttPacket.parser>;

  private constructor(
    readonly socket: Socket,
    readonly protocolVersion: 3 | 4 | 5,
  ) {
    socket.on('error', () => undefined); // the broker cutting a hostile client off is expected
    this.closed = new Promise((resolve) => socket.once('close', () => resolve()));
    void this.closed.then(() => {
      this.isClosed = true;
      for (const wake of this.waiters.values()) wake({ cmd: 'disconnect' });
      this.waiters.clear();
    });
    this.parser = mqttPacket.parser({ protocolVersion });
    this.parser.on('packet', (packet: mqttPacket.Packet) => this.onPacket(packet));
    this.parser.on('error', () => socket.destroy());
    socket.on('data', (chunk: Buffer) => this.parser.parse(chunk));
  }

  static async open(port: number, protocolVersion: 3 | 4 | 5 = 5, timeoutMs = 3000): Promise<Wire> {
    const socket = connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    const timer = setTimeout(() => socket.destroy(new Error('connect timeout')), timeoutMs);
    try {
      await once(socket, 'connect');
    } finally {
      clearTimeout(timer);
    }
    return new Wire(socket, protocolVersion);
  }

  /** Opens and sends CONNECT; resolves with the CONNACK's code (0 accepted), or null if none came. */
  static async connected(port: number, packet: mqttPacket.IConnectPacket, timeoutMs = 3000): Promise<{ wire: Wire; code: number | null }> {
    const wire = await Wire.open(port, packet.protocolVersion ?? 4, timeoutMs);
    const connack = wire.await('connack', timeoutMs);
    wire.write(packet);
    const reply = (await connack) as mqttPacket.IConnackPacket | null;
    return { wire, code: reply === null || reply.cmd !== 'connack' ? null : (reply.reasonCode ?? reply.returnCode ?? 0) };
  }

  messageId(): number {
    this.nextId = (this.nextId % 65535) + 1;
    return this.nextId;
  }

  /** Sends a packet; false when it cannot be encoded (the generator made an impossible one) or the socket is gone. */
  write(packet: mqttPacket.Packet | Buffer): boolean {
    if (this.isClosed) return false;
    let bytes: Buffer;
    try {
      bytes = Buffer.isBuffer(packet) ? packet : mqttPacket.generate(packet, { protocolVersion: this.protocolVersion });
    } catch {
      return false;
    }
    this.socket.write(bytes);
    return true;
  }

  /** The next packet of `cmd` (for `messageId` if given), or null on timeout or close. */
  await(cmd: mqttPacket.PacketCmd, timeoutMs: number, messageId?: number): Promise<mqttPacket.Packet | null> {
    const key = `${cmd}:${messageId ?? '*'}`;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiters.delete(key);
        resolve(null);
      }, timeoutMs);
      this.waiters.set(key, (packet) => {
        clearTimeout(timer);
        resolve(packet.cmd === cmd ? packet : null);
      });
    });
  }

  /** Stops reading: what the broker sends piles up in its buffers (a stalled client). */
  stall(): void {
    this.socket.pause();
  }

  destroy(): void {
    this.socket.destroy();
  }

  async end(): Promise<void> {
    if (this.isClosed) return;
    this.write({ cmd: 'disconnect' });
    this.socket.end();
    const timer = setTimeout(() => this.socket.destroy(), 1000);
    await this.closed;
    clearTimeout(timer);
  }

  private onPacket(packet: mqttPacket.Packet): void {
    if (packet.cmd === 'publish') {
      if (packet.qos > 0 && packet.messageId !== undefined) this.write({ cmd: packet.qos === 1 ? 'puback' : 'pubrec', messageId: packet.messageId });
      this.onPublish(packet);
    }
    if (packet.cmd === 'pubrel' && packet.messageId !== undefined) this.write({ cmd: 'pubcomp', messageId: packet.messageId });
    for (const key of [`${packet.cmd}:${packet.messageId ?? '*'}`, `${packet.cmd}:*`]) {
      const wake = this.waiters.get(key);
      if (wake !== undefined) {
        this.waiters.delete(key);
        wake(packet);
        return;
      }
    }
  }
}
