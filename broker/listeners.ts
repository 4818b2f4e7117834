// The broker's listeners: MQTT over TCP, TLS (mTLS with a CA file) and WebSocket, each
// handing its connections to Aedes with what the broker needs to know about them.
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import type { Duplex } from 'node:stream';
import type { Aedes, Client } from 'aedes';
import { ConfigError } from '../contract/index.js';
import { listen } from '../contract/listen.js';
import type { ListenerOptions } from './options.js';
import { deliverWithoutWaiting, guardStream, type SlowDrop, type StreamLimits } from './stream-guard.js';
import type { Logger } from 'pino';
import { allowedOrigins, originAllowed } from './ws-origin.js';

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

/** What every listener shares: where its connections go, and what is open so far. */
interface Intake {
  readonly config: ListenerOptions;
  readonly aedes: Aedes;
  readonly connections: WeakMap<object, ConnectionInfo>;
  readonly log: Logger;
  readonly limits: StreamLimits;
  readonly hooks: ListenerHooks;
  readonly sockets: Set<Socket>;
  readonly servers: Array<{ close(): unknown }>;
}

/** What the listeners count (metrics). */
export interface ListenerHooks {
  tlsRefused(): void;
  /** A browser WebSocket from an Origin not in MQTT_WS_ALLOWED_ORIGINS. */
  originRefused(): void;
  slowDropped(reason: SlowDrop): void;
}

export async function startListeners(
  config: ListenerOptions,
  aedes: Aedes,
  connections: WeakMap<object, ConnectionInfo>,
  log: Logger,
  hooks: ListenerHooks,
  limits: StreamLimits,
): Promise<Listeners> {
  const intake: Intake = { config, aedes, connections, log, limits, hooks, sockets: new Set(), servers: [] };
  const close = (): void => {
    for (const server of intake.servers) server.close();
  };
  try {
    const mqttPort = await listenTcp(intake);
    const tlsPort = config.mqttTlsPort === undefined ? undefined : await listenTls(intake, config.mqttTlsPort);
    const wsPort = config.mqttWsPort === undefined ? undefined : await listenWebSocket(intake, config.mqttWsPort);
    return { mqttPort, tlsPort, wsPort, sockets: intake.sockets, close };
  } catch (err) {
    close();
    throw err;
  }
}

function track(intake: Intake, socket: Socket): void {
  // Without this each reply waits for the next packet (Nagle + delayed ACK).
  socket.setNoDelay(true);
  intake.sockets.add(socket);
  socket.once('close', () => intake.sockets.delete(socket));
}

/** Gives Aedes a connection, guarded by the stream limits, and records what it is. */
function hand(intake: Intake, conn: Duplex, info: ConnectionInfo, req?: IncomingMessage): void {
  intake.connections.set(conn, info);
  let client: Client | undefined;
  const guarded = guardStream(conn, intake.limits, intake.log, { clientId: () => client?.id, dropped: intake.hooks.slowDropped });
  client = deliverWithoutWaiting(intake.aedes.handle(guarded, req));
}

async function listenTcp(intake: Intake): Promise<number> {
  const { config, log } = intake;
  const tcp = createServer((socket: Socket) => {
    track(intake, socket);
    hand(intake, socket, { transport: 'tcp', address: socket.remoteAddress ?? 'unknown' });
  });
  intake.servers.push(tcp);
  const port = await listen(tcp, config.mqttHost, config.mqttPort, 'MQTT_PORT', 'MQTT');
  log.info({ host: config.mqttHost, port }, 'MQTT listener up');
  return port;
}

async function listenTls(intake: Intake, tlsPort: number): Promise<number> {
  const { config, log } = intake;
  const { server: tls, mtls } = createTlsListener(intake);
  tls.on('tlsClientError', (err: Error, socket: TLSSocket) => {
    intake.hooks.tlsRefused();
    log.warn({ address: socket.remoteAddress, err: err.message }, 'TLS handshake refused');
  });
  intake.servers.push(tls);
  const port = await listen(tls, config.mqttHost, tlsPort, 'MQTT_TLS_PORT', 'MQTT TLS');
  log.info({ host: config.mqttHost, port, mtls }, 'MQTT TLS listener up');
  return port;
}

/** The TLS server from the PEM files; with a CA file, client certificates are required (mTLS). */
function createTlsListener(intake: Intake): { server: Server; mtls: boolean } {
  const { config } = intake;
  if (config.tlsCertFile === undefined || config.tlsKeyFile === undefined) {
    throw new ConfigError('MQTT_TLS_PORT', 'needs TLS_CERT_FILE and TLS_KEY_FILE');
  }
  const cert = readPem(config.tlsCertFile, 'TLS_CERT_FILE');
  const key = readPem(config.tlsKeyFile, 'TLS_KEY_FILE');
  const ca = config.tlsCaFile === undefined ? undefined : readPem(config.tlsCaFile, 'TLS_CA_FILE');
  const mtls = ca !== undefined;
  try {
    const server = createTlsServer(
      { cert, key, ...(ca ? { ca } : {}), minVersion: 'TLSv1.2', requestCert: mtls, rejectUnauthorized: mtls },
      (socket: TLSSocket) => {
        track(intake, socket);
        const certIdentity = mtls ? certificateIdentity(socket) : undefined;
        hand(intake, socket, { transport: 'tls', address: socket.remoteAddress ?? 'unknown', ...(certIdentity ? { certIdentity } : {}) });
      },
    );
    return { server, mtls };
  } catch (err) {
    // A certificate, key or CA that does not parse, or a key that does not match.
    throw new ConfigError('TLS_CERT_FILE', `TLS_CERT_FILE/TLS_KEY_FILE/TLS_CA_FILE cannot be used: ${err instanceof Error ? err.message : String(err)}`);
  }
}

async function listenWebSocket(intake: Intake, wsPort: number): Promise<number> {
  const { config, log } = intake;
  // Loaded only when MQTT_WS_PORT is set: a start without it should not wait for ws.
  const { WebSocketServer, createWebSocketStream } = await import('ws');
  const http = createHttpServer((_req, res) => {
    res.writeHead(426, { 'content-type': 'text/plain' }).end('MQTT over WebSocket: upgrade required\n');
  });
  // ws buffers a whole message before handing it on: bound it too (not the default 100 MB).
  // Twice the packet cap leaves room for a client that puts two packets in one frame; the
  // stream guard still checks each MQTT packet against the cap.
  const wss = new WebSocketServer({
    server: http,
    maxPayload: 2 * intake.limits.maxPacketBytes,
    verifyClient: originCheck(intake, allowedOrigins(config.mqttWsAllowedOrigins)),
  });
  wss.on('connection', (ws, req: IncomingMessage) => {
    track(intake, req.socket);
    const stream: Duplex = createWebSocketStream(ws);
    stream.on('error', (err) => log.debug({ err: err.message }, 'websocket stream error'));
    hand(intake, stream, { transport: 'ws', address: req.socket.remoteAddress ?? 'unknown' }, req);
  });
  wss.on('error', (err) => log.warn({ err: err.message }, 'websocket server error'));
  intake.servers.push({ close: () => wss.close() }, http);
  const port = await listen(http, config.mqttHost, wsPort, 'MQTT_WS_PORT', 'MQTT WebSocket');
  log.info({ host: config.mqttHost, port }, 'MQTT WebSocket listener up');
  return port;
}

type OriginCheck = (info: { origin: string | undefined; req: IncomingMessage }, verified: (ok: boolean, code?: number) => void) => void;

/** MQTT_WS_ALLOWED_ORIGINS: a browser from another Origin is refused at the upgrade (HTTP 403), before any MQTT. */
function originCheck(intake: Intake, origins: ReadonlySet<string>): OriginCheck {
  return ({ origin, req }, verified) => {
    if (originAllowed(origin, origins)) return verified(true);
    intake.hooks.originRefused();
    intake.log.warn({ origin: String(origin).slice(0, 256), address: req.socket.remoteAddress }, 'WebSocket refused: Origin not in MQTT_WS_ALLOWED_ORIGINS');
    verified(false, 403);
  };
}
