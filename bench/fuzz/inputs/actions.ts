// What an attacker does in one iteration, as plain data a generator makes and the attacker
// carries out (attacker.ts). `kind` names the generator, for the iteration counts.
import type { IPublishPacket, ISubscribePacket, QoS } from 'mqtt-packet';

export const KINDS = [
  'json-random',
  'json-mutated',
  'json-deep',
  'request-fields',
  'bytes',
  'cbor',
  'template',
  'image',
  'topic',
  'properties',
  'duplicate',
  'session',
  'subscribe',
  'raw',
  'identity',
] as const;
export type Kind = (typeof KINDS)[number];

/** PUBLISHes on the attacker's own connection: `copies` of the same packet, back to back. */
export interface PublishAction {
  op: 'publish';
  topic: string;
  payload: Buffer;
  qos: QoS;
  retain: boolean;
  properties?: IPublishPacket['properties'];
  copies: number;
}

/** A persistent session (client id `{self}.{suffix}`) that subscribes and then never reads: it leaves, or stalls. */
export interface SessionAction {
  op: 'session';
  suffix: string;
  version: 4 | 5;
  expiryS: number | undefined;
  filters: string[];
  leave: 'disconnect' | 'stall' | 'vanish';
  holdMs: number;
}

/** SUBSCRIBE (then perhaps UNSUBSCRIBE) on the attacker's own connection. */
export interface SubscribeAction {
  op: 'subscribe';
  subscriptions: ISubscribePacket['subscriptions'];
  unsubscribe: boolean;
}

/** Bytes on a fresh TCP connection, then held open (reading or not) for a while. */
export interface RawAction {
  op: 'raw';
  chunks: Buffer[];
  holdMs: number;
  stall: boolean;
}

/** Connects anonymously with another device's client id and acts as it. */
export interface IdentityAction {
  op: 'identity';
  clientId: string;
  publish: PublishAction;
  subscribe: boolean;
  holdMs: number;
}

export type Action = (PublishAction | SessionAction | SubscribeAction | RawAction | IdentityAction) & { kind: Kind };
