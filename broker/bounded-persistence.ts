// Aedes' persistence (in memory, or aedes-persistence-redis) with the offline queues bounded:
// each queued message is stamped with an expiry (OFFLINE_MESSAGE_TTL_S, or its own shorter
// MQTT 5 one) that Aedes honours at delivery, and after each enqueue the clients' queues are
// trimmed to MAX_OFFLINE_MESSAGES, the oldest dropped and counted. The trim is not awaited:
// a reply is delivered as soon as it is queued, and the bound holds once the trim lands.
// A session that ends (a clean CONNECT, an expiry) has its queue dropped with it.
import { Readable } from 'node:stream';
import type { Dropped, OutgoingQueues, QueuedPacket, SessionBackend } from './session-backend.js';

export interface OfflineLimits {
  /** MAX_OFFLINE_MESSAGES: entries one client's queue keeps. */
  readonly maxMessages: number;
  /** OFFLINE_MESSAGE_TTL_S: how long a message waits for its client. */
  readonly messageTtlS: number;
}

/** What happened to offline queues, for metrics. */
export interface OfflineCounts {
  readonly dropped: Dropped;
}

type Client = { id: string; clean?: boolean };
type Persistence = OutgoingQueues & { cleanSubscriptions(client: Client): Promise<unknown> };

export function boundPersistence<P extends object>(
  inner: P,
  backend: SessionBackend,
  limits: OfflineLimits,
  counts: OfflineCounts,
  onError: (err: unknown) => void,
): P {
  const base = inner as unknown as Persistence;
  const queues: OutgoingQueues = backend.outgoing ?? base;
  const count = (dropped: Dropped): void => {
    counts.dropped.queue_full += dropped.queue_full;
    counts.dropped.expired += dropped.expired;
  };
  const expiryOf = (packet: QueuedPacket, now: number): number => Math.min(packet.messageExpiry ?? Infinity, now + limits.messageTtlS * 1000);

  const overrides: Record<string, unknown> = {
    outgoingEnqueue: (sub: { clientId: string }, packet: QueuedPacket) => enqueue([sub], packet),
    outgoingEnqueueCombi: (subs: ReadonlyArray<{ clientId: string }> | undefined, packet: QueuedPacket) => enqueue(subs ?? [], packet),
    outgoingUpdate: (client: Client, packet: QueuedPacket) => {
      // A packet delivered live is stored again here: it keeps an age too.
      packet.messageExpiry ??= Date.now() + limits.messageTtlS * 1000;
      return queues.outgoingUpdate(client, packet);
    },
    outgoingClearMessageId: (client: Client, packet: QueuedPacket) => queues.outgoingClearMessageId(client, packet),
    outgoingStream: (client: Client) => Readable.from(deliverable(client)),
    cleanSubscriptions: async (client: Client) => {
      await backend.drop(client.id);
      // A persistent session that starts clean (MQTT 5 Clean Start) keeps its register entry.
      if (client.clean !== false) await backend.remove(client.id);
      return base.cleanSubscriptions(client);
    },
  };

  async function enqueue(subs: ReadonlyArray<{ clientId: string }>, packet: QueuedPacket): Promise<void> {
    if (subs.length === 0) return;
    const now = Date.now();
    await queues.outgoingEnqueueCombi(subs, { ...packet, messageExpiry: expiryOf(packet, now) });
    const clientIds = [...new Set(subs.map((s) => s.clientId))];
    backend.trim(clientIds, limits.maxMessages, now).then(count, onError);
  }

  /** The expired heads are dropped (and counted) before a reconnecting client gets its queue. */
  async function* deliverable(client: Client): AsyncGenerator<QueuedPacket> {
    count(await backend.trim([client.id], limits.maxMessages, Date.now()));
    yield* queues.outgoingStream(client);
  }

  return new Proxy(inner, {
    get(target, prop) {
      if (typeof prop === 'string' && prop in overrides) return overrides[prop];
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
