// The broker port: everything the bridge needs from MQTT, whichever broker carries it.
// `embedded` runs Aedes in this process; `external` joins the plant's broker as a client.
import type { Refusals } from '../../broker/broker.js';
import type { Publish } from '../../contract/index.js';

/** Refused operations and dropped slow clients, counted by the embedded broker (metrics). */
export type BrokerRefusals = Pick<Refusals, 'publish' | 'subscribe' | 'connect' | 'slow'>;

export interface MqttPort {
  readonly mode: 'embedded' | 'external';
  /** Publishes into MQTT; with an external broker, waits for the connection while it is down. */
  readonly publish: Publish;
  /** False while requests cannot arrive or replies cannot leave (the external connection is down). */
  connected(): boolean;
  /** MQTT clients connected to this instance (embedded only; the plant's broker knows its own). */
  clientIds(): string[];
  /** How many of them, without listing them (metrics read it at every scrape). */
  clientCount(): number;
  /** Refused operations, for metrics (embedded only: the plant's broker refuses its own). */
  refusals(): BrokerRefusals;
  /** Ports this instance listens on for MQTT (none with an external broker). */
  readonly ports: { mqtt?: number; mqttTls?: number; mqttWs?: number };
  /** Re-reads AUTH_FILE on SIGHUP (embedded only). */
  reloadAuth(): void;
  /**
   * Shutdown's first step: stops requests from arriving, and resolves once those already
   * handed over are admitted (the plant's broker then routes them to other instances).
   */
  quiesce(): Promise<void>;
  /** Closes; replies published before this have left. */
  close(): Promise<void>;
}
