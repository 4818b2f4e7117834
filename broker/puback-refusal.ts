// MQTT 5 PUBACK reason codes for requests the bridge refused at admission. Aedes
// 2.0.0-beta.1 lets authorizePublish set only one code (0x87 Not authorized, by calling back
// with an error); for the others this writes the acknowledgement itself, with the code and
// a reason string, and marks the packet the way the beta marks a refused one, so Aedes
// neither acknowledges nor forwards it again. MQTT 3.1.1 acknowledgements carry no reason.
import type { Client, PublishPacket } from 'aedes';
import mqttPacket from 'mqtt-packet';
import type { PubackRefusal } from '../contract/index.js';

/** Clients that asked for no reason strings (Request Problem Information = 0, MQTT 5 3.1.2.11.7). */
export type QuietClients = WeakSet<Client>;

/**
 * Writes an MQTT 5 refusal PUBACK/PUBREC when the client can take one (the caller then calls
 * back without an error, as for any admitted publish); MQTT 3.1.1 and QoS 0 get none.
 */
export function writeRefusal(client: Client, packet: PublishPacket, refusal: PubackRefusal, quiet: QuietClients): void {
  if (client.version !== 5 || packet.qos === 0 || packet.messageId === undefined) return;
  const conn = (client as unknown as { conn: NodeJS.WritableStream & { writable?: boolean } }).conn;
  if (!conn.writable) return;
  const ack = {
    cmd: packet.qos === 1 ? ('puback' as const) : ('pubrec' as const),
    messageId: packet.messageId,
    reasonCode: refusal.reasonCode,
    ...(quiet.has(client) ? {} : { properties: { reasonString: refusal.reasonString.slice(0, 256) } }),
  };
  conn.write(mqttPacket.generate(ack, { protocolVersion: 5 }));
  // Aedes 2.0.0-beta.1's own flag for a publish it answered with a refusal (handlers/publish.js).
  (packet as PublishPacket & { _notAuthorized?: boolean })._notAuthorized = true;
}
