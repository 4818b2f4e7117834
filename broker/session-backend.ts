// What the bounds on persistent sessions need from where the sessions live: Aedes' in-memory
// persistence (sessions-memory.ts) or aedes-persistence-redis (sessions-redis.ts). A session
// is grouped with its device by its client id up to the first `.` (`cam-1`, `cam-1.scada`).

/** A queued packet as Aedes hands it to the persistence. */
export interface QueuedPacket {
  brokerId: string;
  brokerCounter: number;
  messageId?: number | undefined;
  /** Absolute expiry, ms since the epoch: Aedes drops a queued packet past it. */
  messageExpiry?: number | undefined;
  [key: string]: unknown;
}

/** Messages dropped from offline queues, by reason. */
export interface Dropped {
  /** The oldest, to keep a queue within MAX_OFFLINE_MESSAGES. */
  queue_full: number;
  /** Older than OFFLINE_MESSAGE_TTL_S (or their own MQTT 5 expiry). */
  expired: number;
}

/**
 * Aedes' outgoing-queue methods, for a backend that keeps the queues itself (memory); the
 * Redis backend leaves them to aedes-persistence-redis and trims after each enqueue.
 */
export interface OutgoingQueues {
  outgoingEnqueueCombi(subs: ReadonlyArray<{ clientId: string }>, packet: QueuedPacket): Promise<void>;
  outgoingUpdate(client: { id: string }, packet: QueuedPacket): Promise<void>;
  outgoingClearMessageId(client: { id: string }, packet: { messageId?: number | undefined }): Promise<QueuedPacket | undefined>;
  outgoingStream(client: { id: string }): Iterable<QueuedPacket> | AsyncIterable<QueuedPacket>;
}

export interface SessionBackend {
  readonly outgoing?: OutgoingQueues;
  /** Keeps each client's queue within `max` entries, the oldest and the expired dropped first. */
  trim(clientIds: readonly string[], max: number, now: number): Promise<Dropped>;
  /** Drops a client's whole queue (its session ended), releasing the packets it held. */
  drop(clientId: string): Promise<void>;
  /** Messages queued for every persistent session of the deployment. */
  total(): Promise<number>;
  /**
   * Registers a persistent session that may expire at `expiresAt` (ms), unless its device
   * already holds `max` other ones: then false, and nothing changes. An id already
   * registered is always accepted (its session resumes).
   */
  open(clientId: string, max: number, expiresAt: number): Promise<boolean>;
  /** Moves the expiry of sessions still registered (a connected session's heartbeat, a disconnect). */
  touch(clientIds: readonly string[], expiresAt: number): Promise<void>;
  /** Forgets a session (it ended). */
  remove(clientId: string): Promise<void>;
  /** Up to `limit` sessions whose expiry passed, each forgotten and returned to one caller only. */
  claimExpired(now: number, limit: number): Promise<string[]>;
  /** Registers the sessions kept from before these bounds existed, expiring at `expiresAt`. */
  adopt?(expiresAt: number): Promise<number>;
}

/** The device a client id belongs to, for MAX_SESSIONS_PER_DEVICE. */
export const deviceOfClientId = (clientId: string): string => {
  const dot = clientId.indexOf('.');
  return dot === -1 ? clientId : clientId.slice(0, dot);
};
