// Opens the MQTT connection: MQTT 5 unless told otherwise, and 3.1.1 when the broker refuses 5.
// After the first connection mqtt.js reconnects by itself; a refused first login fails `connect`.
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { BridgeConnectError } from './errors.js';
import type { ConnectOptions, ClientSettings } from './options.js';

/** CONNACK codes that mean "not this protocol version": 3.1.1's 1, MQTT 5's 0x84. */
const PROTOCOL_REFUSED = new Set([1, 0x84]);
const RECONNECT_PERIOD_MS = 1000;

export async function openConnection(options: ConnectOptions, settings: ClientSettings): Promise<{ mqtt: MqttClient; protocolVersion: 4 | 5 }> {
  try {
    return { mqtt: await open(options, settings, settings.protocolVersion), protocolVersion: settings.protocolVersion };
  } catch (err) {
    if (settings.protocolVersion === 5 && err instanceof BridgeConnectError && PROTOCOL_REFUSED.has(err.reasonCode ?? -1)) {
      return { mqtt: await open(options, settings, 4), protocolVersion: 4 };
    }
    throw err;
  }
}

function open(options: ConnectOptions, settings: ClientSettings, protocolVersion: 4 | 5): Promise<MqttClient> {
  const mqttOptions: IClientOptions = {
    clientId: settings.clientId,
    protocolVersion,
    keepalive: settings.keepalive,
    clean: true,
    reconnectPeriod: RECONNECT_PERIOD_MS,
    connectTimeout: settings.connectTimeoutMs,
    ...(options.username !== undefined ? { username: options.username } : {}),
    ...(options.password !== undefined ? { password: options.password } : {}),
    ...(options.ca !== undefined ? { ca: options.ca } : {}),
    ...(options.cert !== undefined ? { cert: options.cert } : {}),
    ...(options.key !== undefined ? { key: options.key } : {}),
  };
  const client = mqtt.connect(options.url, mqttOptions);
  // Nagle's algorithm with delayed ACKs holds each small request ~40 ms: off, on every (re)connect.
  client.on('connect', () => (client.stream as { setNoDelay?: (on: boolean) => unknown } | undefined)?.setNoDelay?.(true));
  return new Promise<MqttClient>((resolve, reject) => {
    const fail = (err: BridgeConnectError): void => {
      clearTimeout(timer);
      client.removeAllListeners('connect');
      client.end(true);
      reject(err);
    };
    let lastError: (Error & { code?: unknown }) | undefined;
    const timer = setTimeout(() => {
      const why = lastError === undefined ? '' : ` (last error: ${lastError.message})`;
      fail(new BridgeConnectError(`no connection to ${options.url} within ${settings.connectTimeoutMs} ms${why}`, undefined, { cause: lastError }));
    }, settings.connectTimeoutMs);
    client.once('connect', () => {
      clearTimeout(timer);
      client.removeAllListeners('error');
      resolve(client);
    });
    client.on('error', (err: Error & { code?: unknown }) => {
      // A CONNACK refusal carries its code; a socket error is retried until the timer.
      if (typeof err.code === 'number') fail(new BridgeConnectError(`${options.url} refused the connection: ${err.message}`, err.code));
      else lastError = err;
    });
  });
}
