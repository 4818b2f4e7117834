// One simulated device of the fleet as MQTT sees it: connect with its own login and subscribe
// to its result topic, noting refusals and drops, the request it publishes, reading a reply,
// and a clean end.
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { type InferRequest, ReplySchema, StreamChunkSchema, topics } from '../contract/index.js';
import { loginOf } from './credentials.js';
import { describeConnectError, noteConnectFailure, noteDisconnect, noteStatus, noteSubscriptionRefused, reasonName, type Diagnosis } from './diagnosis.js';
import type { FleetOptions } from './fleet-options.js';
import type { Outcome } from './stats.js';

/** What a device reports to its run. */
export interface DeviceEvents {
  onMessage: (device: string, topic: string, payload: Buffer) => void;
  diagnosis: Diagnosis;
  /** This device also reads bridge/+/status (one per fleet is enough). */
  watchStatus: boolean;
}

const STATUS_FILTER = topics.status('+');

const END_GRACE_MS = 2_000;

export async function connectDevice(opts: FleetOptions, id: string, events: DeviceEvents): Promise<MqttClient> {
  const login = loginOf(opts, id);
  const connectOpts: IClientOptions = {
    clientId: id,
    clean: true,
    connectTimeout: 10_000,
    // Reconnect during the run like a real device would; replies missed meanwhile count as lost.
    reconnectPeriod: 1_000,
    protocolVersion: opts.mqtt5 === true ? 5 : 4,
    ...login,
  };
  let client: MqttClient;
  try {
    // No retries for the first connect: a wrong URL or credentials should fail the run at once.
    client = await mqtt.connectAsync(opts.url, connectOpts, false);
  } catch (err) {
    throw new Error(describeConnectError(err, opts.url, login.username), { cause: err });
  }
  const { diagnosis } = events;
  client.on('message', (topic, payload) => {
    if (!topic.startsWith('bridge/')) events.onMessage(id, topic, payload);
  });
  // Replies published before the subscription exists would be dropped, so subscribe first.
  const filters = { [topics.result(id)]: { qos: 1 as const }, ...(opts.stream ? { [topics.stream(id)]: { qos: 0 as const } } : {}) };
  try {
    // A refused result topic is noted, not fatal: the run goes on and its hint says why nothing came.
    await subscribeNoting(client, filters, (topic, code) => noteSubscriptionRefused(diagnosis, id, topic, code));
    await watchDevice(client, id, events);
  } catch (err) {
    client.end(true);
    throw err;
  }
  return client;
}

/** What the run notes of every device, raw or a client's: its drops, failed reconnects and (one device) the bridge's status. */
export async function watchDevice(client: MqttClient, id: string, events: DeviceEvents): Promise<void> {
  const { diagnosis } = events;
  disableNagle(client);
  watchConnection(client, id, diagnosis);
  client.on('message', (topic, payload) => {
    if (topic.startsWith('bridge/')) noteStatus(diagnosis, payload);
  });
  if (events.watchStatus) {
    await subscribeNoting(client, { [STATUS_FILTER]: { qos: 0 } }, () => {
      diagnosis.statusRefused = true;
    });
  }
}

/** Subscribes; a refused filter (SUBACK 0x80 and up) goes to `onRefused` with its code. */
async function subscribeNoting(client: MqttClient, filters: Record<string, { qos: 0 | 1 }>, onRefused: (topic: string, code: number) => void): Promise<void> {
  // mqtt.js rejects the whole SUBSCRIBE when one filter is refused; ask one filter at a time.
  for (const [topic, options] of Object.entries(filters)) {
    try {
      const grants = await client.subscribeAsync({ [topic]: options });
      const refused = grants.find((g) => g.qos >= 0x80);
      if (refused !== undefined) onRefused(topic, refused.qos);
    } catch (err) {
      // mqtt.js rejects a refused SUBSCRIBE with the SUBACK attached.
      const code = (err as { packet?: { granted?: unknown[] } }).packet?.granted?.find((c): c is number => typeof c === 'number' && c >= 0x80);
      if (code === undefined) throw err;
      onRefused(topic, code);
    }
  }
}

/** Notes connections the broker closes during the run (with an MQTT 5 DISCONNECT's reason) and failed reconnects. */
function watchConnection(client: MqttClient, id: string, diagnosis: Diagnosis): void {
  let connected = true;
  let reason = 'connection closed by the broker';
  client.on('connect', () => {
    connected = true;
    reason = 'connection closed by the broker';
    disableNagle(client);
  });
  client.on('disconnect', (packet) => {
    reason = `DISCONNECT ${reasonName(packet.reasonCode ?? 0)}${packet.properties?.reasonString === undefined ? '' : ` "${packet.properties.reasonString}"`}`;
  });
  client.on('close', () => {
    // end() sets `disconnecting`: a close the run asked for is no drop.
    if (connected && !client.disconnecting) noteDisconnect(diagnosis, id, reason);
    connected = false;
  });
  client.on('error', (err) => {
    // Reconnects report errors here; without a listener they would crash the process.
    if (!client.disconnecting) noteConnectFailure(diagnosis, id, err.message);
  });
}

export async function endClient(client: MqttClient): Promise<void> {
  // A polite end waits for outstanding acks, which a dead broker never sends; then force it.
  let timer: NodeJS.Timeout | undefined;
  const timedOut = await Promise.race([
    client.endAsync(false).then(() => false),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), END_GRACE_MS);
    }),
  ]);
  clearTimeout(timer);
  if (timedOut) await client.endAsync(true);
}

/**
 * Nagle's algorithm holds small writes until the previous one is acked, which with delayed
 * ACKs adds a wait to every request/reply exchange: an artefact of the simulator, not of the bridge.
 */
function disableNagle(client: MqttClient): void {
  const stream = client.stream as { setNoDelay?: (noDelay: boolean) => unknown } | undefined;
  if (typeof stream?.setNoDelay === 'function') stream.setNoDelay(true);
}

export function requestPayload(deviceId: string, seq: number, question: number | undefined, ttlMs?: number, stream?: boolean): InferRequest {
  // Distinct text per request unless asked otherwise, so the bridge's cache does not flatter the numbers.
  const content =
    question === undefined ? `device ${deviceId} request ${seq}: is part ${seq} within tolerance?` : `question ${question}: is the part within tolerance?`;
  const request: InferRequest = { id: `${deviceId}-${seq}`, messages: [{ role: 'user', content }], max_tokens: 32 };
  if (ttlMs !== undefined) request.ttl_ms = ttlMs;
  if (stream === true) request.stream = true;
  return request;
}

/** The reply's outcome, or null when it is not a reply (unparseable, or no id). */
export function readReply(payload: Buffer): { id: string; outcome: Outcome } | null {
  const data = jsonOf(payload);
  const parsed = ReplySchema.safeParse(data);
  if (parsed.success) {
    const reply = parsed.data;
    if (reply.id === null) return null;
    return { id: reply.id, outcome: reply.ok ? { ok: true } : { ok: false, code: reply.error.code } };
  }
  // A reply that names one of our ids but breaks the schema still answers that request.
  if (typeof data === 'object' && data !== null && typeof (data as { id?: unknown }).id === 'string') {
    return { id: (data as { id: string }).id, outcome: { ok: false, code: 'malformed_reply' } };
  }
  return null;
}

/** The request a stream chunk starts the text of (`seq` 0 with a `delta`); null for any other chunk or message. */
export function firstChunkOf(payload: Buffer): string | null {
  const parsed = StreamChunkSchema.safeParse(jsonOf(payload));
  return parsed.success && parsed.data.seq === 0 && 'delta' in parsed.data ? parsed.data.id : null;
}

/** The payload as JSON, or undefined when it is not JSON (which no schema accepts). */
function jsonOf(payload: Buffer): unknown {
  try {
    return JSON.parse(payload.toString('utf8'));
  } catch {
    return undefined;
  }
}
