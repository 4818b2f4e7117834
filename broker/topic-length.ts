// MAX_TOPIC_LENGTH: the longest topic or topic filter (UTF-8 bytes) the broker accepts in a
// PUBLISH, SUBSCRIBE, UNSUBSCRIBE or Will. Our own topics are a few dozen bytes; a long one
// costs every subscription match, the sessions kept in Redis and each log line naming it.
import type { Client } from 'aedes';

/** MQTT 5 DISCONNECT reason code. */
const TOPIC_FILTER_INVALID = 0x8f;

/** How much of a refused topic a log line shows. */
const LOGGED_CHARS = 128;

/** True when `topic` is longer than `max` bytes (UTF-8); the length decides most topics without encoding them. */
export function topicTooLong(topic: string, max: number): boolean {
  if (topic.length > max) return true;
  if (topic.length * 3 <= max) return false;
  return Buffer.byteLength(topic, 'utf8') > max;
}

/** A refused topic for a log line: its start and its size, never all of it. */
export function loggedTopic(topic: string): { topic: string; topicBytes: number } {
  return { topic: topic.length > LOGGED_CHARS ? `${topic.slice(0, LOGGED_CHARS)}…` : topic, topicBytes: Buffer.byteLength(topic, 'utf8') };
}

interface PacketSource {
  listeners(event: 'packet'): Array<(packet: unknown) => void>;
  removeAllListeners(event: 'packet'): unknown;
  on(event: 'packet', listener: (packet: unknown) => void): unknown;
}

/**
 * Aedes 2.0.0-beta.1 has no hook for UNSUBSCRIBE: an over-long filter there is dropped with
 * its connection (MQTT 5: DISCONNECT 0x8F Topic Filter invalid), as Aedes drops one with
 * too many levels. No subscription can have such a
 * filter, so a well-behaved client never sends one; refusing it before Aedes keeps it out of
 * the persistence and of the `$SYS` unsubscribe notice every instance receives.
 * Installed on the client's parser (private to Aedes), ahead of Aedes' own listener.
 */
export function refuseLongUnsubscribes(client: Client, max: number, refused: (filter: string) => void): void {
  const parser = (client as unknown as { _parser?: PacketSource })._parser;
  if (!parser) throw new Error('Aedes client has no _parser: this version is not supported');
  const handlers = parser.listeners('packet');
  parser.removeAllListeners('packet');
  parser.on('packet', function guard(this: unknown, packet: unknown) {
    const filters = (packet as { cmd?: string; unsubscriptions?: unknown }).unsubscriptions;
    const long = Array.isArray(filters) ? filters.find((f): f is string => typeof f === 'string' && topicTooLong(f, max)) : undefined;
    if (long !== undefined) {
      parser.removeAllListeners('packet');
      refused(long);
      client.disconnect({ reasonCode: TOPIC_FILTER_INVALID });
      return;
    }
    for (const handler of handlers) handler.call(this, packet);
  });
}
