// What the embedded broker needs to know, as its own type: the bridge's Config fits it, and
// the broker never imports the bridge.

export interface ListenerOptions {
  mqttHost: string;
  /** 0 picks a free port. */
  mqttPort: number;
  /** Each of these starts one more listener when set. */
  mqttTlsPort?: number | undefined;
  tlsCertFile?: string | undefined;
  tlsKeyFile?: string | undefined;
  /** Client certificates signed by this CA are required (mTLS). */
  tlsCaFile?: string | undefined;
  mqttWsPort?: number | undefined;
  /** Browser Origins the WebSocket listener accepts (`scheme://host[:port]`); none: no browser. */
  mqttWsAllowedOrigins: readonly string[];
}

export interface BrokerConfig extends ListenerOptions {
  allowAnonymous: boolean;
  maxConnections: number;
  connectTimeoutMs: number;
  keepaliveLimitS: number;
  drainTimeoutMs: number;
  maxInflightQos2: number;
  // Optional so a broker built without them (tests, tools) is a plain TCP broker.
  authFile?: string | undefined;
  // The limits below have their defaults in the bridge's schema (bridge/config/variables.ts)
  // only: whoever starts a broker passes them, as the bridge passes its Config.
  maxPayloadBytes: number;
  /** IMAGE_MAX_BYTES: raw camera images may be larger than requests; the packet limit follows the larger. */
  imageMaxBytes: number;
  maxClientBacklogBytes: number;
  maxSubscriptions: number;
  /** MAX_TOPIC_LENGTH: the longest topic or filter (bytes) in a PUBLISH, SUBSCRIBE, UNSUBSCRIBE or Will. */
  maxTopicLength: number;
  /**
   * The longest MQTT 5 Session Expiry Interval granted, seconds (a longer one is cut to it);
   * also how long a 3.1.1 persistent session outlives its client's absence.
   */
  maxSessionExpiryS: number;
  /** Messages one persistent session's offline queue keeps; over it the oldest are dropped. */
  maxOfflineMessages: number;
  /** Seconds a message waits in an offline queue. */
  offlineMessageTtlS: number;
  /** Persistent sessions one device id (client ids `id` and `id.*`) may hold. */
  maxSessionsPerDevice: number;
  /** Topic filters observers may read besides the contract's: the plant's namespace (`{root}/#`). */
  observerTopics?: readonly string[] | undefined;
}
