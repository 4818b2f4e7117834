// Persistent sessions in this process (no REDIS_URL): the offline queues themselves, in place
// of those of Aedes' in-memory persistence (whose queues are private and have no bound), and
// the register of sessions by device with their expiry.
import { deviceOfClientId, type Dropped, type OutgoingQueues, type QueuedPacket, type SessionBackend } from './session-backend.js';

export class MemorySessions implements SessionBackend {
  private readonly queues = new Map<string, QueuedPacket[]>();
  private queued = 0;
  /** Device → its registered client ids. */
  private readonly devices = new Map<string, Set<string>>();
  /** Client id → when its session expires (ms). */
  private readonly expiries = new Map<string, number>();

  readonly outgoing: OutgoingQueues = {
    outgoingEnqueueCombi: async (subs, packet) => {
      for (const { clientId } of subs) this.queueOf(clientId).push({ ...packet, messageId: undefined });
      this.queued += subs.length;
    },
    outgoingUpdate: async (client, packet) => {
      const queue = this.queueOf(client.id);
      const i = queue.findIndex((p) => p.brokerId === packet.brokerId && p.brokerCounter === packet.brokerCounter);
      const entry = queue[i];
      if (entry) {
        entry.messageId = packet.messageId;
        return;
      }
      // A QoS 2 PUBREL takes the place of the PUBLISH it follows (same message id).
      const j = queue.findIndex((p) => p.messageId === packet.messageId);
      if (j === -1) throw new Error('no such packet');
      queue[j] = packet;
    },
    outgoingClearMessageId: async (client, packet) => {
      const queue = this.queues.get(client.id);
      const i = queue?.findIndex((p) => p.messageId === packet.messageId) ?? -1;
      if (!queue || i === -1) return undefined;
      const [removed] = queue.splice(i, 1);
      this.queued -= 1;
      if (queue.length === 0) this.queues.delete(client.id);
      return removed;
    },
    // A copy: the queue changes while Aedes delivers it.
    outgoingStream: (client) => [...(this.queues.get(client.id) ?? [])],
  };

  async trim(clientIds: readonly string[], max: number, now: number): Promise<Dropped> {
    const dropped: Dropped = { queue_full: 0, expired: 0 };
    for (const id of clientIds) {
      const queue = this.queues.get(id);
      if (!queue) continue;
      let expired = 0;
      while (expired < queue.length && (queue[expired]?.messageExpiry ?? Infinity) <= now) expired += 1;
      const full = Math.max(0, queue.length - expired - max);
      queue.splice(0, expired + full);
      this.queued -= expired + full;
      dropped.expired += expired;
      dropped.queue_full += full;
      if (queue.length === 0) this.queues.delete(id);
    }
    return dropped;
  }

  async drop(clientId: string): Promise<void> {
    this.queued -= this.queues.get(clientId)?.length ?? 0;
    this.queues.delete(clientId);
  }

  async total(): Promise<number> {
    return this.queued;
  }

  async open(clientId: string, max: number, expiresAt: number): Promise<boolean> {
    const device = deviceOfClientId(clientId);
    const ids = this.devices.get(device) ?? new Set<string>();
    if (!ids.has(clientId) && ids.size >= max) return false;
    ids.add(clientId);
    this.devices.set(device, ids);
    this.expiries.set(clientId, expiresAt);
    return true;
  }

  async touch(clientIds: readonly string[], expiresAt: number): Promise<void> {
    for (const id of clientIds) if (this.expiries.has(id)) this.expiries.set(id, expiresAt);
  }

  async remove(clientId: string): Promise<void> {
    this.expiries.delete(clientId);
    const device = deviceOfClientId(clientId);
    const ids = this.devices.get(device);
    ids?.delete(clientId);
    if (ids?.size === 0) this.devices.delete(device);
  }

  async claimExpired(now: number, limit: number): Promise<string[]> {
    const due: string[] = [];
    for (const [id, expiresAt] of this.expiries) {
      if (due.length >= limit) break;
      if (expiresAt <= now) due.push(id);
    }
    for (const id of due) await this.remove(id);
    return due;
  }

  private queueOf(clientId: string): QueuedPacket[] {
    let queue = this.queues.get(clientId);
    if (!queue) this.queues.set(clientId, (queue = []));
    return queue;
  }
}
