// Inbound QoS 2 bookkeeping that Aedes 1.x did itself and Aedes 2.0.0-beta.1 no longer does
// (the beta branched off before those fixes landed in 1.1.3/1.2.0):
// - MAX_INFLIGHT_QOS2 (1.x `maxInflightInbound`): a client may hold at most this many QoS 2
//   PUBLISHes stored while it withholds PUBREL; one more drops the connection, whatever the
//   protocol version (v5 clients are told the window in CONNACK's Receive Maximum; a DISCONNECT
//   0x93 is not sent, as the PUBRECs of the same read batch would follow it on the wire).
// - A duplicate PUBREL racing the first one: the beta's pubrel handler lets the memory
//   persistence's "no such packet" rejection escape (`.finally()`), an unhandled rejection that
//   ends the process. The release below never rejects (PUBCOMP is owed either way).
// - [MQTT-3.1.2-6]: a clean session's stored QoS 2 entries end with its connection (1.x
//   `cleanIncoming`); without it a client that never sends PUBREL leaves them behind for good,
//   and a later connection with the same client id has a new message taken for a duplicate.
// All three sit on the two persistence calls that store and release an inbound QoS 2 message.
import type { Aedes, Client, PublishPacket } from 'aedes';
import type { Logger } from 'pino';

interface IncomingStore {
  incomingStorePacket(client: Client, packet: PublishPacket): Promise<unknown>;
  incomingDelPacket(client: Client, packet: { messageId?: number }): Promise<unknown>;
}

export function limitInboundQos2(aedes: Aedes, limit: number, log: Logger): void {
  const persistence = (aedes as unknown as { persistence: IncomingStore }).persistence;
  const store = persistence.incomingStorePacket.bind(persistence);
  const release = persistence.incomingDelPacket.bind(persistence);
  /** Message ids each connection has stored and not yet released. */
  const held = new WeakMap<Client, Set<number>>();

  // Called synchronously once Aedes found no stored copy, so a whole read batch of new
  // messages cannot slip past the check; a DUP retransmission re-uses its own slot.
  persistence.incomingStorePacket = (client, packet) => {
    const id = packet.messageId as number;
    let ids = held.get(client);
    if (!ids) held.set(client, (ids = new Set()));
    if (!ids.has(id) && ids.size >= limit) {
      const err = new Error(`MAX_INFLIGHT_QOS2: ${limit} inbound QoS 2 messages already await PUBREL`);
      log.warn({ clientId: client.id, limit }, 'connection dropped: MAX_INFLIGHT_QOS2 exceeded');
      return Promise.reject(err); // Aedes drops the connection
    }
    ids.add(id);
    return store(client, packet).catch((err: unknown) => {
      ids.delete(id);
      throw err;
    });
  };

  persistence.incomingDelPacket = (client, packet) =>
    release(client, packet).then(
      () => void held.get(client)?.delete(packet.messageId as number),
      () => undefined, // already released (a duplicate PUBREL): nothing to do, and no crash
    );

  aedes.on('clientDisconnect', (client) => {
    const ids = held.get(client);
    held.delete(client);
    if (!ids || !client.clean) return;
    for (const messageId of ids) release(client, { messageId }).catch(() => undefined);
  });
}
