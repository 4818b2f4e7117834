// One idle device's connection: a bare socket (from its loopback source when spread) that
// sends CONNECT, subscribes to its result topic and then only acknowledges what arrives,
// counted into the fleet it belongs to.
import { connect, type Socket } from 'node:net';
import { generate, parser, type Packet } from 'mqtt-packet';
import { topics } from '../contract/index.js';
import type { Login } from './credentials.js';
import { loopbackSource, type SourceEndpoint } from './idle-source.js';

export const PROGRESS_EVERY = 1000;

/** What every connection of a fleet reads, resolved once by connectIdle. */
export interface IdleSettings {
  target: { address: string; spread: boolean };
  port: number;
  prefix: string;
  perAddress: number;
  keepaliveS: number;
  handshakeTimeoutMs: number;
  login: (clientId: string) => Login;
  onProgress: ((connected: number) => void) | undefined;
  onMessage: ((clientId: string, topic: string, payload: Buffer) => void) | undefined;
}

/** A fleet's settings, open connections and counts, shared by all its devices. */
export interface IdleFleetState {
  readonly settings: IdleSettings;
  /** Devices past the handshake whose socket is still open. */
  readonly open: Set<Socket>;
  connected: number;
  failed: number;
  dropped: number;
  firstError: string | undefined;
  /** Set by close(), so the connections it ends are not counted as dropped. */
  closing: boolean;
}

interface Device {
  readonly clientId: string;
  readonly socket: Socket;
  readonly source: Partial<SourceEndpoint>;
  /** Until TCP connects: an address error then means the chosen source port was taken. */
  connecting: boolean;
  phase: 'handshake' | 'idle' | 'done';
  readonly resolve: (ok: boolean | Promise<boolean>) => void;
}

// A chosen source port can be taken (a listener on it, another program's connection).
const PORT_TAKEN = new Set(['EADDRINUSE', 'EADDRNOTAVAIL']);

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * One device's handshake; resolves true once subscribed, false (counted) on any failure.
 * `choosePort` false: the source address is still spread, the kernel picks the port.
 */
export function connectOne(fleet: IdleFleetState, index: number, choosePort = true): Promise<boolean> {
  return new Promise((resolve) => {
    const device = openSocket(fleet.settings, index, choosePort, resolve);
    watch(fleet, device, index);
  });
}

function openSocket(settings: IdleSettings, index: number, choosePort: boolean, resolve: Device['resolve']): Device {
  const clientId = `${settings.prefix}-idle-${index + 1}`;
  let source: Partial<SourceEndpoint> = {};
  if (settings.target.spread) {
    const endpoint = loopbackSource(index, settings.perAddress);
    source = choosePort ? endpoint : { localAddress: endpoint.localAddress };
  }
  const socket = connect({ host: settings.target.address, port: settings.port, ...source });
  return { clientId, socket, source, connecting: true, phase: 'handshake', resolve };
}

function watch(fleet: IdleFleetState, device: Device, index: number): void {
  const { socket } = device;
  const { handshakeTimeoutMs } = fleet.settings;
  const packets = parser({ protocolVersion: 4 });
  socket.setTimeout(handshakeTimeoutMs, () => settle(fleet, device, false, `no CONNACK/SUBACK within ${handshakeTimeoutMs} ms`));
  socket.once('connect', () => {
    device.connecting = false;
    socket.write(generate(connectPacket(fleet.settings, device.clientId)));
  });
  socket.on('data', (chunk: Buffer) => packets.parse(chunk));
  socket.on('error', (err: NodeJS.ErrnoException) => onSocketError(fleet, device, index, err));
  socket.once('close', () => onClose(fleet, device));
  packets.on('error', (err: unknown) => {
    settle(fleet, device, false, `bad packet from the broker: ${errorMessage(err)}`);
    socket.destroy();
  });
  packets.on('packet', (packet: Packet) => onPacket(fleet, device, packet));
}

function connectPacket(settings: IdleSettings, clientId: string): Packet {
  const packet: Packet = { cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clientId, clean: true, keepalive: settings.keepaliveS };
  const { username, password } = settings.login(clientId);
  if (username !== undefined) packet.username = username;
  if (password !== undefined) packet.password = Buffer.from(password, 'utf8');
  return packet;
}

/** Ends the handshake once: idle and counted as connected, or closed and counted as failed. */
function settle(fleet: IdleFleetState, device: Device, ok: boolean, message?: string): void {
  if (device.phase !== 'handshake') return;
  if (ok) {
    device.phase = 'idle';
    device.socket.setTimeout(0);
    fleet.open.add(device.socket);
    fleet.connected += 1;
    if (fleet.connected % PROGRESS_EVERY === 0) fleet.settings.onProgress?.(fleet.connected);
  } else {
    device.phase = 'done';
    fleet.failed += 1;
    fleet.firstError ??= `${device.clientId}: ${message ?? 'failed'}`;
    device.socket.destroy();
  }
  device.resolve(ok);
}

function onSocketError(fleet: IdleFleetState, device: Device, index: number, err: NodeJS.ErrnoException): void {
  if (device.connecting && device.source.localPort !== undefined && PORT_TAKEN.has(err.code ?? '') && device.phase === 'handshake') {
    device.phase = 'done';
    device.socket.destroy();
    device.resolve(connectOne(fleet, index, false));
    return;
  }
  settle(fleet, device, false, errorMessage(err));
}

function onClose(fleet: IdleFleetState, device: Device): void {
  settle(fleet, device, false, 'connection closed during the handshake');
  if (device.phase === 'idle') {
    fleet.open.delete(device.socket);
    if (!fleet.closing) fleet.dropped += 1;
  }
  device.phase = 'done';
}

function onPacket(fleet: IdleFleetState, device: Device, packet: Packet): void {
  const write = (reply: Packet): boolean => device.socket.write(generate(reply));
  switch (packet.cmd) {
    case 'connack':
      if (packet.returnCode !== 0) settle(fleet, device, false, `CONNACK return code ${String(packet.returnCode)}`);
      else write({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: topics.result(device.clientId), qos: 1 }] });
      break;
    case 'suback':
      if (packet.granted[0] === 128) settle(fleet, device, false, `subscription to ${topics.result(device.clientId)} refused`);
      else settle(fleet, device, true);
      break;
    case 'publish':
      // Unacknowledged QoS 1/2 messages would sit in the broker's inflight state and be resent.
      if (packet.qos === 1) write({ cmd: 'puback', messageId: packet.messageId as number });
      else if (packet.qos === 2) write({ cmd: 'pubrec', messageId: packet.messageId as number });
      fleet.settings.onMessage?.(device.clientId, packet.topic, Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload));
      break;
    case 'pubrel':
      write({ cmd: 'pubcomp', messageId: packet.messageId as number });
      break;
    default:
      break; // PINGRESP and anything else an idle device does not act on
  }
}
