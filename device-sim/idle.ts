// Idle devices for connection-capacity runs: tens of thousands of MQTT connections that
// connect, subscribe to their result topic and then only keep alive. Each one is a bare
// socket plus an mqtt-packet parser (an mqtt.js client costs far more per connection, and
// the generator must not be what runs out first).
import type { Socket } from 'node:net';
import { generate } from 'mqtt-packet';
import type { Login } from './credentials.js';
import { connectOne, PROGRESS_EVERY, type IdleFleetState, type IdleSettings } from './idle-connection.js';
import { DEFAULT_PER_SOURCE_ADDRESS, loopbackSource, resolveTarget } from './idle-source.js';

export { loopbackSource, resolveTarget, type SourceEndpoint } from './idle-source.js';

export interface IdleOptions {
  host: string;
  port: number;
  count: number;
  /** Client ids are `${prefix}-idle-${n}`, n from 1; default `sim`. */
  prefix?: string;
  username?: string;
  password?: string;
  /** Each device's login by client id, instead of `username` and `password`. */
  login?: (clientId: string) => Login;
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

const IDLE_DEFAULTS = {
  prefix: 'sim',
  concurrency: 200,
  keepaliveS: 300,
  perSourceAddress: DEFAULT_PER_SOURCE_ADDRESS,
  handshakeTimeoutMs: 30_000,
} as const;

const CLOSE_GRACE_MS = 5_000;

// Shared by every socket: a PINGREQ and a DISCONNECT are the same bytes for all of them.
const PINGREQ = generate({ cmd: 'pingreq' });
const DISCONNECT = generate({ cmd: 'disconnect' });

export async function connectIdle(opts: IdleOptions): Promise<IdleFleet> {
  const concurrency = opts.concurrency ?? IDLE_DEFAULTS.concurrency;
  const settings = await resolveSettings(opts, concurrency);
  const fleet: IdleFleetState = { settings, open: new Set(), connected: 0, failed: 0, dropped: 0, firstError: undefined, closing: false };

  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < opts.count) await connectOne(fleet, next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, opts.count) }, worker));
  if (fleet.connected % PROGRESS_EVERY !== 0) opts.onProgress?.(fleet.connected);

  const ping = startPinging(fleet.open, settings.keepaliveS);
  return {
    connected: fleet.connected,
    failed: fleet.failed,
    ...(fleet.firstError === undefined ? {} : { firstError: fleet.firstError }),
    get dropped() {
      return fleet.dropped;
    },
    close: () => closeFleet(fleet, ping),
  };
}

/** The options checked and with defaults applied; throws RangeError before anything connects. */
async function resolveSettings(opts: IdleOptions, concurrency: number): Promise<IdleSettings> {
  const keepaliveS = opts.keepaliveS ?? IDLE_DEFAULTS.keepaliveS;
  const perAddress = opts.perSourceAddress ?? IDLE_DEFAULTS.perSourceAddress;
  if (!(Number.isInteger(opts.count) && opts.count >= 0)) throw new RangeError(`count must be a non-negative integer, got ${opts.count}`);
  if (!(Number.isInteger(concurrency) && concurrency >= 1)) throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`);
  if (!(Number.isInteger(keepaliveS) && keepaliveS >= 1 && keepaliveS <= 65535)) {
    throw new RangeError(`keepaliveS must be an integer from 1 to 65535, got ${keepaliveS}`);
  }
  const target = await resolveTarget(opts.host);
  if (target.spread) loopbackSource(Math.max(0, opts.count - 1), perAddress); // fail before connecting anything
  return {
    target,
    port: opts.port,
    prefix: opts.prefix ?? IDLE_DEFAULTS.prefix,
    perAddress,
    keepaliveS,
    handshakeTimeoutMs: opts.handshakeTimeoutMs ?? IDLE_DEFAULTS.handshakeTimeoutMs,
    login:
      opts.login ??
      ((): Login => ({
        ...(opts.username === undefined ? {} : { username: opts.username }),
        ...(opts.password === undefined ? {} : { password: opts.password }),
      })),
    onProgress: opts.onProgress,
    onMessage: opts.onMessage,
  };
}

/**
 * One timer for the whole fleet: a timer per socket would be tens of thousands of timers.
 * Pinging at half the keep-alive keeps every device well inside the broker's 1.5× grace.
 */
function startPinging(open: Set<Socket>, keepaliveS: number): NodeJS.Timeout {
  const ping = setInterval(
    () => {
      for (const socket of open) if (socket.writable) socket.write(PINGREQ);
    },
    (keepaliveS * 1000) / 2,
  );
  ping.unref();
  return ping;
}

async function closeFleet(fleet: IdleFleetState, ping: NodeJS.Timeout): Promise<void> {
  fleet.closing = true;
  clearInterval(ping);
  const sockets = [...fleet.open].filter((socket) => !socket.destroyed);
  const closed = sockets.map((socket) => new Promise<void>((resolve) => socket.once('close', () => resolve())));
  for (const socket of sockets) socket.end(DISCONNECT);
  // A broker that never closes its side must not hold close() forever; one timer for all.
  const timer = setTimeout(() => {
    for (const socket of sockets) socket.destroy();
  }, CLOSE_GRACE_MS);
  await Promise.all(closed);
  clearTimeout(timer);
}
