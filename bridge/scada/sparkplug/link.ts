// How the Edge Node reaches MQTT, whichever broker carries it. With the plant's broker a
// session is a dedicated connection whose Will is the NDEATH; with the embedded broker it is a
// pair of subscriptions on the in-process broker, and no Will can outlive the process.

export interface LinkMessageHandlers {
  /** A message on one of the session's filters (NCMD, the primary host's STATE). */
  message(topic: string, payload: Buffer): void;
  /** The session ended on its own (connection lost): the broker has sent the Will. */
  lost(): void;
}

export interface LinkSession {
  /** QoS 0, not retained: every Sparkplug message of an Edge Node but its Will. */
  publish(topic: string, payload: Buffer): Promise<void>;
  /**
   * Ends the session. `death` (the NDEATH) is published first when given (an intentional
   * disconnect); without it the plant's broker is left to send the Will.
   */
  end(death: { topic: string; payload: Buffer } | undefined): Promise<void>;
}

export interface SparkplugLink {
  /** True when the broker sends the NDEATH of a session whose process died (a Will). */
  readonly willOutlivesProcess: boolean;
  /** Opens a session with `will` as its death certificate, subscribed to `filters` before it resolves. */
  open(will: { topic: string; payload: Buffer }, filters: string[], handlers: LinkMessageHandlers): Promise<LinkSession>;
}
