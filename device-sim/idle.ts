// Idle devices for connection-capacity runs: tens of thousands of MQTT connections that
// connect, subscribe to their result topic and then only keep alive. Each one is a bare
// socket plus an mqtt-packet parser (an mqtt.js client costs far more per connection, and
// the generator must not be what runs out first).
import { lookup } from 'node:dns/promises';
import { connect, isIPv4, type Socket } from 'node:net';
import { generate, parser, type Packet } from 'mqtt-packet';
import { topics } from '../contract/index.js';

export interface IdleOptions {
  host: string;
  port: number;
  count: number;
  /** Client ids are `${prefix}-idle-${n}`, n from 1; default `sim`. */
  prefix?: string;
  username?: string;
  password?: string;
  /** Handshakes (connect, CONNACK, SUBACK) in flight at once; default 200. */
  concurrency?: number;
  /** MQTT keep-alive asked for; default 300 s (the bridge accepts up to KEEPALIVE_LIMIT_S). */
  keepaliveS?: number;
  /** Connections per loopback source address; default 10 000. */
  perSourceAddress?: number;
  /** A device that gets no CONNACK/SUBACK within this fails; default 30 000 ms. */
  handshakeTimeoutMs?: number;
  /** Called with the running count of connected devices, about every 1000. */
  onProgress?: (connected: number) => void;
  /** Every PUBLISH an idle device receives (it is acknowledged whatever this does). */
  onMessage?: (clientId: string, topic: string, payload: Buffer) => void;
}

export interface IdleFleet {
  /** Devices that got CONNACK 0 and their subscription granted. */
  connected: number;
  failed: number;
  /** The first failure, as `${clientId}: ${message}`. */
  firstError?: string;
  /** Connected devices whose connection has closed since, before close() (live count). */
  readonly dropped: number;
  /** Sends DISCONNECT on every open connection; resolves once all are closed. */
  close(): Promise<void>;
}

export const IDLE_DEFAULTS = {
  prefix: 'sim',
  concurrency: 200,
  keepaliveS: 300,
  perSourceAddress: 10_000,
  handshakeTimeoutMs: 30_000,
} as const;

const PROGRESS_EVERY = 1000;
const CLOSE_GRACE_MS = 5_000;
// 127.0.0.1 is left to everything else on the machine; idle devices start at 127.0.0.2.
const FIRST_SOURCE = (127 << 24) + 2;
const LAST_SOURCE = (127 << 24) + 0xfffffe;
// Below Linux's ephemeral range (32768–60999), so the ports chosen here do not compete with
// the ports the kernel hands out to other programs' outgoing connections.
const FIRST_SOURCE_PORT = 20_000;
const MAX_PER_ADDRESS = 65_535 - FIRST_SOURCE_PORT + 1;

export interface SourceEndpoint {
  localAddress: string;
  localPort: number;
}

/**
 * The loopback source (address and port) of the index-th connection (from 0). Linux gives
 * out ~28k ephemeral ports per (source, destination, port), so one source address cannot
 * carry 30k connections to one broker port; all of 127.0.0.0/8 is loopback and needs no
 * setup. The port is chosen here too: a bind() to port 0 makes the kernel search for a free
 * port, which costs milliseconds per connection once thousands are bound (20 000 idle devices
 * took 80 s that way), while a given port binds at once.
 */
export function loopbackSource(index: number, perAddress: number = IDLE_DEFAULTS.perSourceAddress): SourceEndpoint {
  if (!(Number.isInteger(index) && index >= 0)) throw new RangeError(`index must be a non-negative integer, got ${index}`);
  if (!(Number.isInteger(perAddress) && perAddress >= 1 && perAddress <= MAX_PER_ADDRESS)) {
    throw new RangeError(`perAddress must be an integer from 1 to ${MAX_PER_ADDRESS}, got ${perAddress}`);
  }
  const n = FIRST_SOURCE + Math.floor(index / perAddress);
  if (n > LAST_SOURCE) throw new RangeError(`connection ${index} needs more source addresses than 127.0.0.0/8 has`);
  return {
    localAddress: [n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff].join('.'),
    localPort: FIRST_SOURCE_PORT + (index % perAddress),
  };
}

// A chosen source port can be taken (a listener on it, another program's connection).
const PORT_TAKEN = new Set(['EADDRINUSE', 'EADDRNOTAVAIL']);

/**
 * Where to connect and whether to spread source addresses: a loopback broker (127.x, or a
 * name such as localhost that resolves to one) gets them; anything else keeps the default
 * source, which is all a remote route has.
 */
export async function resolveTarget(host: string): Promise<{ address: string; spread: boolean }> {
  const address = isIPv4(host) ? host : (await lookup(host, { family: 4 }).catch(() => ({ address: host }))).address;
  return isIPv4(address) && address.startsWith('127.') ? { address, spread: true } : { address: host, spread: false };
}

// Shared by every socket: a PINGREQ and a DISCONNECT are the same bytes for all of them.
const PINGREQ = generate({ cmd: 'pingreq' });
const DISCONNECT = generate({ cmd: 'disconnect' });

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export async function connectIdle(opts: IdleOptions): Promise<IdleFleet> {
  const prefix = opts.prefix ?? IDLE_DEFAULTS.prefix;
  const concurrency = opts.concurrency ?? IDLE_DEFAULTS.concurrency;
  const keepaliveS = opts.keepaliveS ?? IDLE_DEFAULTS.keepaliveS;
  const perAddress = opts.perSourceAddress ?? IDLE_DEFAULTS.perSourceAddress;
  const handshakeTimeoutMs = opts.handshakeTimeoutMs ?? IDLE_DEFAULTS.handshakeTimeoutMs;
  if (!(Number.isInteger(opts.count) && opts.count >= 0)) throw new RangeError(`count must be a non-negative integer, got ${opts.count}`);
  if (!(Number.isInteger(concurrency) && concurrency >= 1)) throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`);
  if (!(Number.isInteger(keepaliveS) && keepaliveS >= 1 && keepaliveS <= 65535)) {
    throw new RangeError(`keepaliveS must be an integer from 1 to 65535, got ${keepaliveS}`);
  }
  const target = await resolveTarget(opts.host);
  if (target.spread) loopbackSource(Math.max(0, opts.count - 1), perAddress); // fail before connecting anything
  const password = opts.password === undefined ? undefined : Buffer.from(opts.password, 'utf8');

  const open = new Set<Socket>();
  let connected = 0;
  let failed = 0;
  let dropped = 0;
  let firstError: string | undefined;
  let closing = false;

  const fail = (clientId: string, message: string): void => {
    failed += 1;
    firstError ??= `${clientId}: ${message}`;
  };

  /**
   * One device's handshake; resolves true once subscribed, false (counted) on any failure.
   * `choosePort` false: the source address is still spread, the kernel picks the port.
   */
  const connectOne = (index: number, choosePort = true): Promise<boolean> =>
    new Promise((resolve) => {
      const clientId = `${prefix}-idle-${index + 1}`;
      let source: Partial<SourceEndpoint> = {};
      if (target.spread) {
        const endpoint = loopbackSource(index, perAddress);
        source = choosePort ? endpoint : { localAddress: endpoint.localAddress };
      }
      const socket = connect({ host: target.address, port: opts.port, ...source });
      let connecting = true;
      const mqtt = parser({ protocolVersion: 4 });
      let state: 'handshake' | 'idle' | 'done' = 'handshake';
      const settle = (ok: boolean, message?: string): void => {
        if (state !== 'handshake') return;
        if (ok) {
          state = 'idle';
          socket.setTimeout(0);
          open.add(socket);
          connected += 1;
          if (connected % PROGRESS_EVERY === 0) opts.onProgress?.(connected);
        } else {
          state = 'done';
          fail(clientId, message ?? 'failed');
          socket.destroy();
        }
        resolve(ok);
      };

      socket.setTimeout(handshakeTimeoutMs, () => settle(false, `no CONNACK/SUBACK within ${handshakeTimeoutMs} ms`));
      socket.once('connect', () => {
        connecting = false;
        const packet: Packet = { cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clientId, clean: true, keepalive: keepaliveS };
        if (opts.username !== undefined) packet.username = opts.username;
        if (password !== undefined) packet.password = password;
        socket.write(generate(packet));
      });
      socket.on('data', (chunk: Buffer) => mqtt.parse(chunk));
      socket.on('error', (err: NodeJS.ErrnoException) => {
        if (connecting && source.localPort !== undefined && PORT_TAKEN.has(err.code ?? '') && state === 'handshake') {
          state = 'done';
          socket.destroy();
          resolve(connectOne(index, false));
          return;
        }
        settle(false, errorMessage(err));
      });
      socket.once('close', () => {
        settle(false, 'connection closed during the handshake');
        if (state === 'idle') {
          open.delete(socket);
          if (!closing) dropped += 1;
        }
        state = 'done';
      });
      mqtt.on('error', (err: unknown) => {
        settle(false, `bad packet from the broker: ${errorMessage(err)}`);
        socket.destroy();
      });
      mqtt.on('packet', (packet: Packet) => {
        switch (packet.cmd) {
          case 'connack':
            if (packet.returnCode !== 0) settle(false, `CONNACK return code ${String(packet.returnCode)}`);
            else socket.write(generate({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: topics.result(clientId), qos: 1 }] }));
            break;
          case 'suback':
            if (packet.granted[0] === 128) settle(false, `subscription to ${topics.result(clientId)} refused`);
            else settle(true);
            break;
          case 'publish':
            // Unacknowledged QoS 1/2 messages would sit in the broker's inflight state and be resent.
            if (packet.qos === 1) socket.write(generate({ cmd: 'puback', messageId: packet.messageId as number }));
            else if (packet.qos === 2) socket.write(generate({ cmd: 'pubrec', messageId: packet.messageId as number }));
            opts.onMessage?.(clientId, packet.topic, Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload));
            break;
          case 'pubrel':
            socket.write(generate({ cmd: 'pubcomp', messageId: packet.messageId as number }));
            break;
          default:
            break; // PINGRESP and anything else an idle device does not act on
        }
      });
    });

  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < opts.count) await connectOne(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, opts.count) }, worker));
  if (connected % PROGRESS_EVERY !== 0) opts.onProgress?.(connected);

  // One timer for the whole fleet: a timer per socket would be tens of thousands of timers.
  // Pinging at half the keep-alive keeps every device well inside the broker's 1.5× grace.
  const ping = setInterval(() => {
    for (const socket of open) if (socket.writable) socket.write(PINGREQ);
  }, (keepaliveS * 1000) / 2);
  ping.unref();

  return {
    connected,
    failed,
    ...(firstError === undefined ? {} : { firstError }),
    get dropped() {
      return dropped;
    },
    async close() {
      closing = true;
      clearInterval(ping);
      const sockets = [...open].filter((socket) => !socket.destroyed);
      const closed = sockets.map((socket) => new Promise<void>((resolve) => socket.once('close', () => resolve())));
      for (const socket of sockets) socket.end(DISCONNECT);
      // A broker that never closes its side must not hold close() forever; one timer for all.
      const timer = setTimeout(() => {
        for (const socket of sockets) socket.destroy();
      }, CLOSE_GRACE_MS);
      await Promise.all(closed);
      clearTimeout(timer);
    },
  };
}
