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
import { ConfigError, type Config } from '../bridge/config.js';
import type { Logger } from '../bridge/logger.js';

export type ListenerConfig = Pick<Config, 'mqttHost' | 'mqttPort'> &
  Partial<Pick<Config, 'mqttTlsPort' | 'tlsCertFile' | 'tlsKeyFile' | 'tlsCaFile' | 'mqttWsPort'>>;

/** A listener could not bind; names the variable that fixes it. */
export class ListenError extends Error {
  override readonly name = 'ListenError';
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(message);
  }
}

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
  config: ListenerConfig,
  aedes: Aedes,
  connections: WeakMap<object, ConnectionInfo>,
  log: Logger,
  onTlsRefused: () => void,
): Promise<Listeners> {
  const sockets = new Set<Socket>();
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
      aedes.handle(socket);
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
            aedes.handle(socket);
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
      const wss = new WebSocketServer({ server: http });
      wss.on('connection', (ws, req: IncomingMessage) => {
        track(req.socket);
        const stream: Duplex = createWebSocketStream(ws);
        stream.on('error', (err) => log.debug({ err: err.message }, 'websocket stream error'));
        connections.set(stream, { transport: 'ws', address: req.socket.remoteAddress ?? 'unknown' });
        aedes.handle(stream, req);
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
