// What one broker's hooks share: who each client is, what its connection and CONNECT told
// the broker, and the refusal counts the metrics read.
import type { Client, ConnectPacket } from 'aedes';
import type { Logger } from 'pino';
import type { Identity } from './acl.js';
import type { ConnectionInfo } from './listeners.js';
import type { BrokerConfig } from './options.js';
import type { QuietClients } from './puback-refusal.js';
import { RefusalLog } from './refusal-log.js';
import type { SlowDrop } from './stream-guard.js';

/** Counts of refused operations, for metrics. */
export interface Refusals {
  publish: number;
  subscribe: number;
  /** Every refused CONNECT, whatever the reason (includes `login` and `throttled`). */
  connect: number;
  /** Failed logins: unknown user or wrong password. */
  login: number;
  /** CONNECTs refused or delayed because their address failed to log in too often. */
  throttled: number;
  /** TLS handshakes refused (no or an untrusted client certificate, an old protocol). */
  tls: number;
  /** Connections dropped for not reading what they were sent, by reason. */
  slow: Record<SlowDrop, number>;
}

export interface BrokerContext {
  readonly config: BrokerConfig;
  readonly log: Logger;
  readonly refusals: Refusals;
  /** Who each authenticated client is. */
  readonly identities: WeakMap<Client, Identity>;
  /** A client's CONNECT, from preConnect until authenticate has checked its will topic. */
  readonly connectPackets: WeakMap<Client, ConnectPacket>;
  readonly quiet: QuietClients;
  /** Refusals of a client logged once per interval with a count, not each time. */
  readonly refusalLog: RefusalLog;
  /** Filled by the listeners: transport, address and certificate of each connection. */
  readonly connections: WeakMap<object, ConnectionInfo>;
}

export function createContext(config: BrokerConfig, log: Logger): BrokerContext {
  return {
    config,
    log,
    refusals: { publish: 0, subscribe: 0, connect: 0, login: 0, throttled: 0, tls: 0, slow: { backlog: 0, drain_timeout: 0 } },
    identities: new WeakMap(),
    connectPackets: new WeakMap(),
    quiet: new WeakSet(),
    refusalLog: new RefusalLog(log),
    connections: new WeakMap(),
  };
}
