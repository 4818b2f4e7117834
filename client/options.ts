// The client's options and their defaults (docs/clients.md lists them for users).
import { DEVICE_ID_PATTERN, PRIORITIES, type Priority } from '../contract/names.js';

export interface ConnectOptions {
  /** `mqtt://host:1883`, `mqtts://host:8883`, `ws://…`, `wss://…`. */
  url: string;
  deviceId: string;
  /** Default `{deviceId}.c{random}`; must be the device id or begin with it and a `.`. */
  clientId?: string;
  username?: string;
  password?: string;
  /** TLS: the CA to trust, and the client certificate and key (mTLS), as their contents. */
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  /** 5 (default; 3.1.1 when the broker refuses 5) or 4 (MQTT 3.1.1). */
  protocolVersion?: 4 | 5;
  /** Seconds; default 30. */
  keepalive?: number;
  /** Default 30 000. */
  connectTimeoutMs?: number;
  /** Requests published and not yet answered; default 100. */
  maxInFlight?: number;
  /** Requests held while the connection is down; default 100. */
  offlineBuffer?: number;
  /** A call's deadline; default 60 000. */
  timeoutMs?: number;
  /** One attempt's wait for its reply before it is sent again; default 20 000. */
  attemptTimeoutMs?: number;
  /** Attempts of one call, the first included; default 8. */
  maxAttempts?: number;
  /** Default `normal`. */
  priority?: Priority;
  /** QoS of the requests; default 1 (the broker acknowledges each, and holds it for the bridge). */
  qos?: 0 | 1 | 2;
}

export interface CallOptions {
  priority?: Priority;
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** Everything a call needs to know of the client's settings. */
export interface CallSettings {
  timeoutMs: number;
  attemptTimeoutMs: number;
  maxAttempts: number;
  priority: Priority;
}

export interface ClientSettings extends CallSettings {
  clientId: string;
  qos: 0 | 1 | 2;
  protocolVersion: 4 | 5;
  keepalive: number;
  connectTimeoutMs: number;
  maxInFlight: number;
  offlineBuffer: number;
}

/** The options with their defaults; a wrong one throws a TypeError naming it. */
export function settingsOf(options: ConnectOptions): ClientSettings {
  if (!DEVICE_ID_PATTERN.test(options.deviceId ?? '')) throw new TypeError('deviceId must be 1 to 64 characters of A-Za-z0-9_-');
  const clientId = options.clientId ?? `${options.deviceId}.c${Math.random().toString(36).slice(2, 10)}`;
  if (clientId !== options.deviceId && !clientId.startsWith(`${options.deviceId}.`)) {
    throw new TypeError(`clientId must be "${options.deviceId}" or begin with "${options.deviceId}."`);
  }
  // The part after the dot names the MQTT 5 Response Topic.
  if (/[/+#]/.test(clientId)) throw new TypeError('clientId must not hold /, + or #: it names a topic');
  const settings: ClientSettings = {
    clientId,
    protocolVersion: options.protocolVersion ?? 5,
    keepalive: options.keepalive ?? 30,
    connectTimeoutMs: options.connectTimeoutMs ?? 30_000,
    maxInFlight: options.maxInFlight ?? 100,
    offlineBuffer: options.offlineBuffer ?? 100,
    timeoutMs: options.timeoutMs ?? 60_000,
    attemptTimeoutMs: options.attemptTimeoutMs ?? 20_000,
    maxAttempts: options.maxAttempts ?? 8,
    priority: options.priority ?? 'normal',
    qos: options.qos ?? 1,
  };
  for (const name of ['keepalive', 'connectTimeoutMs', 'maxInFlight', 'timeoutMs', 'attemptTimeoutMs', 'maxAttempts'] as const) {
    if (!(Number.isFinite(settings[name]) && settings[name] > 0)) throw new TypeError(`${name} must be a positive number`);
  }
  if (!(Number.isInteger(settings.offlineBuffer) && settings.offlineBuffer >= 0)) throw new TypeError('offlineBuffer must be an integer ≥ 0');
  if (settings.protocolVersion !== 4 && settings.protocolVersion !== 5) throw new TypeError('protocolVersion must be 4 or 5');
  if (![0, 1, 2].includes(settings.qos)) throw new TypeError('qos must be 0, 1 or 2');
  checkPriority(settings.priority);
  return settings;
}

/** A priority outside the contract's four would be refused by the bridge: say so at the call. */
export function checkPriority(priority: string): asserts priority is Priority {
  if (!(PRIORITIES as readonly string[]).includes(priority)) throw new TypeError(`priority must be one of ${PRIORITIES.join(', ')}`);
}
