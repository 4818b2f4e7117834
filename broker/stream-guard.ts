// Per-connection stream limits (packet size, outgoing backlog, drain time) and write
// coalescing, applied to every transport's connection before Aedes reads from it.
import type { Duplex } from 'node:stream';
import type { Client } from 'aedes';
import type { Logger } from 'pino';

/** Per-connection stream limits, applied to every transport. */
export interface StreamLimits {
  /** Largest MQTT remaining length accepted; a packet announcing more drops the connection. */
  maxPacketBytes: number;
  /** Largest unsent outgoing backlog; a connection whose backlog exceeds it is dropped. */
  maxBacklogBytes: number;
  /** A connection whose socket stays full (no 'drain') this long is dropped. */
  drainTimeoutMs: number;
}

/** Why a connection was dropped for not reading what it is sent. */
export type SlowDrop = 'backlog' | 'drain_timeout';

/** What a guarded connection tells its owner. */
export interface GuardHooks {
  /** The MQTT client id, once CONNECT named it (for the log line). */
  clientId(): string | undefined;
  /** Counted in metrics. */
  dropped(reason: SlowDrop): void;
}

/**
 * Aedes makes a delivery wait for the receiving socket's 'drain' once that socket's buffer is
 * over its high-water mark, and a publish completes only once every delivery has: one
 * subscriber that stops reading (a frozen SCADA PC) then holds back every reply it also
 * receives, for every device, until it is dropped. Here a delivery completes as soon as its
 * packet is buffered; the buffer stays bounded by the backlog limit and the drain timeout
 * of guardStream.
 */
export function deliverWithoutWaiting(client: Client): Client {
  (client as unknown as { waitForDrain(done: (err: Error | null, c: Client) => void): void }).waitForDrain = (done) => setImmediate(done, null, client);
  return client;
}

/**
 * Enforces StreamLimits on one connection without wrapping it (Aedes keeps the socket itself,
 * so setNoDelay, TLS and the drain timeout work as before):
 *
 * - Packet size: Aedes reads with `conn.read()` and hands every byte to mqtt-packet, which
 *   buffers a whole packet before Aedes sees it. `read` is wrapped so a PacketSizeScanner sees
 *   the same bytes first; once a fixed header announces more than `maxPacketBytes` (or is
 *   malformed) the connection is destroyed and the bytes are never parsed: a huge PUBLISH
 *   costs one socket read, not its whole size in memory.
 * - Coalescing: the first write in an event-loop turn corks the connection and the next turn
 *   uncorks it, so the PUBACK, the replies and whatever else a turn produced for one device
 *   leave in one system call. On loopback and small packets the write syscall, not Aedes, is
 *   what limits a broker (docs/performance.md); the cost is at most one loop turn.
 * - Backlog: every write Aedes makes goes through `conn.write`; it is wrapped to check
 *   `writableLength` after each call and drop the connection on the next tick when the unsent
 *   backlog exceeds `maxBacklogBytes` (deferred so the packet being written completes first).
 * - Drain: a write that leaves the buffer over its high-water mark starts a timer; the
 *   connection is dropped unless it drains within `drainTimeoutMs`.
 */
export function guardStream<T extends Duplex>(conn: T, limits: StreamLimits, log: Logger, hooks: GuardHooks): T {
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
  const drop = (reason: SlowDrop, msg: string): void => {
    dropping = true;
    const backlog = conn.writableLength;
    log.warn({ clientId: hooks.clientId(), backlog, reason }, msg);
    hooks.dropped(reason);
    // Deferred so the packet being written completes first.
    process.nextTick(() => conn.destroy(new Error(`${msg} (${backlog} bytes unsent)`)));
  };
  let drainTimer: NodeJS.Timeout | undefined;
  const drained = (): void => {
    clearTimeout(drainTimer);
    drainTimer = undefined;
  };
  conn.once('close', drained);
  const watchDrain = (): void => {
    if (drainTimer !== undefined) return;
    conn.once('drain', drained);
    drainTimer = setTimeout(() => {
      drainTimer = undefined;
      if (!dropping && !conn.destroyed) drop('drain_timeout', 'connection dropped: not drained within DRAIN_TIMEOUT_MS');
    }, limits.drainTimeoutMs);
    drainTimer.unref();
  };

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
    if (dropping) return result;
    if (conn.writableLength > limits.maxBacklogBytes) {
      drop('backlog', 'connection dropped: outgoing backlog over MAX_CLIENT_BACKLOG_BYTES');
    } else if (!result) {
      watchDrain();
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
