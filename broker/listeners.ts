// The broker's listeners: MQTT over TCP, TLS (mTLS with a CA file) and WebSocket, each
// handing its connections to Aedes with what the broker needs to know about them.
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage } from 'node:http';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import type { Duplex } from 'node:stream';
import type { Aedes } from 'aedes';
import { WebSocketServer, createWebSocketStream } from 'ws';
import { ConfigError, ListenError } from '../contract/index.js';
import type { ListenerOptions } from './options.js';
import type { Logger } from 'pino';


/** Binds a server; a busy port becomes a ListenError naming the variable to change. */
export async function listen(server: Server, host: string, port: number, variable: string, what: string): Promise<number> {
  server.listen(port, host);
  try {
    await once(server, 'listening');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new ListenError(variable, `${what} port ${port} is in use — set ${variable}`);
    if (code === 'EADDRNOTAVAIL') throw new ListenError(variable, `${what} address ${host} is not on this machine`);
    if (code === 'EACCES') throw new ListenError(variable, `${what} port ${port} needs privileges — set ${variable}`);
    throw err;
  }
  return (server.address() as AddressInfo).port;
}

/** What the broker knows of a connection beyond its MQTT packets. */
export interface ConnectionInfo {
  transport: 'tcp' | 'tls' | 'ws';
  /** The peer's IP address (the throttle key for failed logins). */
  address: string;
  /** mTLS: the verified client certificate's CN, or its first DNS SAN without a CN. */
  certIdentity?: string;
}

/** Per-connection stream limits, applied to every transport. */
export interface StreamLimits {
  /** Largest MQTT remaining length accepted; a packet announcing more drops the connection. */
  maxPacketBytes: number;
  /** Largest unsent outgoing backlog; a connection whose backlog exceeds it is dropped. */
  maxBacklogBytes: number;
}

export interface Listeners {
  mqttPort: number;
  tlsPort: number | undefined;
  wsPort: number | undefined;
  /** Every open socket (for the close-time flush). */
  sockets: Set<Socket>;
  close(): void;
}

/** The certificate's CN, or its first DNS subject alternative name. */
export function certificateIdentity(socket: TLSSocket): string | undefined {
  if (!socket.authorized) return undefined;
  const cert = socket.getPeerCertificate();
  if (!cert || Object.keys(cert).length === 0) return undefined;
  const cn = cert.subject?.CN;
  if (typeof cn === 'string' && cn.length > 0) return cn;
  if (Array.isArray(cn) && typeof cn[0] === 'string') return cn[0];
  const dns = (cert.subjectaltname ?? '')
    .split(',')
    .map((s) => s.trim())
    .find((s) => s.startsWith('DNS:'));
  return dns?.slice(4);
}

function readPem(path: string, variable: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new ConfigError(variable, `${path}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

export async function startListeners(
  config: ListenerOptions,
  aedes: Aedes,
  connections: WeakMap<object, ConnectionInfo>,
  log: Logger,
  onTlsRefused: () => void,
  limits: StreamLimits,
): Promise<Listeners> {
  const sockets = new Set<Socket>();
  const guard = (conn: Duplex): Duplex => guardStream(conn, limits, log);
  const track = (socket: Socket): void => {
    // Without this each reply waits ~40 ms for the next packet (Nagle + delayed ACK).
    socket.setNoDelay(true);
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  const servers: Array<{ close(): unknown }> = [];
  const closeAll = (): void => {
    for (const server of servers) server.close();
  };

  try {
    const tcp = createServer((socket: Socket) => {
      track(socket);
      connections.set(socket, { transport: 'tcp', address: socket.remoteAddress ?? 'unknown' });
      aedes.handle(guard(socket));
    });
    servers.push(tcp);
    const mqttPort = await listen(tcp, config.mqttHost, config.mqttPort, 'MQTT_PORT', 'MQTT');
    log.info({ host: config.mqttHost, port: mqttPort }, 'MQTT listener up');

    let tlsPort: number | undefined;
    if (config.mqttTlsPort !== undefined) {
      if (config.tlsCertFile === undefined || config.tlsKeyFile === undefined) {
        throw new ConfigError('MQTT_TLS_PORT', 'needs TLS_CERT_FILE and TLS_KEY_FILE');
      }
      const cert = readPem(config.tlsCertFile, 'TLS_CERT_FILE');
      const key = readPem(config.tlsKeyFile, 'TLS_KEY_FILE');
      const ca = config.tlsCaFile === undefined ? undefined : readPem(config.tlsCaFile, 'TLS_CA_FILE');
      const mtls = ca !== undefined;
      let tls: Server;
      try {
        tls = createTlsServer(
          { cert, key, ...(ca ? { ca } : {}), minVersion: 'TLSv1.2', requestCert: mtls, rejectUnauthorized: mtls },
          (socket: TLSSocket) => {
            track(socket);
            const certIdentity = mtls ? certificateIdentity(socket) : undefined;
            connections.set(socket, { transport: 'tls', address: socket.remoteAddress ?? 'unknown', ...(certIdentity ? { certIdentity } : {}) });
            aedes.handle(guard(socket));
          },
        );
      } catch (err) {
        // A certificate, key or CA that does not parse, or a key that does not match.
        throw new ConfigError('TLS_CERT_FILE', `TLS_CERT_FILE/TLS_KEY_FILE/TLS_CA_FILE cannot be used: ${err instanceof Error ? err.message : String(err)}`);
      }
      tls.on('tlsClientError', (err: Error, socket: TLSSocket) => {
        onTlsRefused();
        log.warn({ address: socket.remoteAddress, err: err.message }, 'TLS handshake refused');
      });
      servers.push(tls);
      tlsPort = await listen(tls, config.mqttHost, config.mqttTlsPort, 'MQTT_TLS_PORT', 'MQTT TLS');
      log.info({ host: config.mqttHost, port: tlsPort, mtls }, 'MQTT TLS listener up');
    }

    let wsPort: number | undefined;
    if (config.mqttWsPort !== undefined) {
      const http = createHttpServer((_req, res) => {
        res.writeHead(426, { 'content-type': 'text/plain' }).end('MQTT over WebSocket: upgrade required\n');
      });
      // ws buffers a whole message before handing it on: bound it too (not the default 100 MB).
      // Twice the packet cap leaves room for a client that puts two packets in one frame; the
      // stream guard below still checks each MQTT packet against the cap.
      const wss = new WebSocketServer({ server: http, maxPayload: 2 * limits.maxPacketBytes });
      wss.on('connection', (ws, req: IncomingMessage) => {
        track(req.socket);
        const stream: Duplex = createWebSocketStream(ws);
        stream.on('error', (err) => log.debug({ err: err.message }, 'websocket stream error'));
        connections.set(stream, { transport: 'ws', address: req.socket.remoteAddress ?? 'unknown' });
        aedes.handle(guard(stream), req);
      });
      wss.on('error', (err) => log.warn({ err: err.message }, 'websocket server error'));
      servers.push({ close: () => wss.close() }, http);
      wsPort = await listen(http, config.mqttHost, config.mqttWsPort, 'MQTT_WS_PORT', 'MQTT WebSocket');
      log.info({ host: config.mqttHost, port: wsPort }, 'MQTT WebSocket listener up');
    }

    return {
      mqttPort,
      tlsPort,
      wsPort,
      sockets,
      close: closeAll,
    };
  } catch (err) {
    closeAll();
    throw err;
  }
}

/**
 * Enforces StreamLimits on one connection without wrapping it (Aedes keeps the socket itself,
 * so setNoDelay, TLS and the drain timeout work as before):
 *
 * - Packet size: Aedes reads with `conn.read()` and hands every byte to mqtt-packet, which
 *   buffers a whole packet before Aedes sees it. `read` is wrapped so a PacketSizeScanner sees
 *   the same bytes first; once a fixed header announces more than `maxPacketBytes` (or is
 *   malformed) the connection is destroyed and the bytes are never parsed: a 200 MB PUBLISH
 *   costs one socket read (≤ 64 KiB), not 200 MB.
 * - Coalescing: the first write in an event-loop turn corks the connection and the next turn
 *   uncorks it, so the PUBACK, the replies and whatever else a turn produced for one device
 *   leave in one system call. On loopback and small packets the write syscall, not Aedes, is
 *   what limits a broker (measured in bench/README.md); the cost is at most one loop turn.
 * - Backlog: every write Aedes makes goes through `conn.write`; it is wrapped to check
 *   `writableLength` after each call and drop the connection on the next tick when the unsent
 *   backlog exceeds `maxBacklogBytes` (deferred so the packet being written completes first).
 */
export function guardStream<T extends Duplex>(conn: T, limits: StreamLimits, log: Logger): T {
  const scanner = new PacketSizeScanner(limits.maxPacketBytes);
  const read = conn.read.bind(conn);
  conn.read = ((size?: number): unknown => {
    const chunk: unknown = read(size);
    if (chunk === null || conn.destroyed || !Buffer.isBuffer(chunk)) return chunk;
    const problem = scanner.feed(chunk);
    if (problem === null) return chunk;
    log.warn({ err: problem }, 'connection dropped: packet too large');
    conn.destroy(new Error(problem));
    return null;
  }) as T['read'];

  let dropping = false;
  let corked = false;
  const uncork = (): void => {
    corked = false;
    conn.uncork();
  };
  const write = conn.write.bind(conn) as (...args: unknown[]) => boolean;
  conn.write = ((...args: unknown[]): boolean => {
    if (!corked) {
      corked = true;
      conn.cork();
      setImmediate(uncork);
    }
    const result = write(...args);
    if (!dropping && conn.writableLength > limits.maxBacklogBytes) {
      dropping = true;
      const backlog = conn.writableLength;
      log.warn({ backlog, limit: limits.maxBacklogBytes }, 'connection dropped: outgoing backlog over MAX_CLIENT_BACKLOG_BYTES');
      process.nextTick(() => conn.destroy(new Error(`outgoing backlog ${backlog} bytes over ${limits.maxBacklogBytes}`)));
    }
    return result;
  }) as T['write'];
  return conn;
}

/**
 * Follows MQTT fixed headers (a type byte, then a 1–4 byte remaining-length varint) across
 * arbitrary chunk boundaries, skipping each packet's body, and reports the first packet whose
 * remaining length is over the limit.
 */
export class PacketSizeScanner {
  private state: 'type' | 'length' | 'body' = 'type';
  private length = 0;
  private multiplier = 1;
  private lengthBytes = 0;
  private remaining = 0;

  constructor(private readonly maxRemainingLength: number) {}

  /** Null while every packet so far is within the limit; otherwise why it is not. */
  feed(chunk: Buffer): string | null {
    let i = 0;
    while (i < chunk.length) {
      if (this.state === 'body') {
        const skip = Math.min(this.remaining, chunk.length - i);
        i += skip;
        this.remaining -= skip;
        if (this.remaining === 0) this.state = 'type';
        continue;
      }
      const byte = chunk[i] as number;
      i += 1;
      if (this.state === 'type') {
        this.state = 'length';
        this.length = 0;
        this.multiplier = 1;
        this.lengthBytes = 0;
        continue;
      }
      // state 'length'
      this.length += (byte & 0x7f) * this.multiplier;
      this.multiplier *= 128;
      this.lengthBytes += 1;
      if (this.length > this.maxRemainingLength) {
        return `packet remaining length over ${this.maxRemainingLength} bytes`;
      }
      if (byte & 0x80) {
        if (this.lengthBytes >= 4) return 'malformed remaining length';
        continue;
      }
      this.remaining = this.length;
      this.state = this.remaining === 0 ? 'type' : 'body';
    }
    return null;
  }
}
