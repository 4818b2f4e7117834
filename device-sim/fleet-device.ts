// One simulated device of the fleet as MQTT sees it: connect and subscribe to its result
// topic, the request it publishes, reading a reply, and a clean end.
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { type InferRequest, ReplySchema, StreamChunkSchema, topics } from '../contract/index.js';
import type { FleetOptions } from './fleet-options.js';
import type { Outcome } from './stats.js';

const END_GRACE_MS = 2_000;

export async function connectDevice(
  opts: FleetOptions,
  id: string,
  onMessage: (device: string, topic: string, payload: Buffer) => void,
): Promise<MqttClient> {
  const connectOpts: IClientOptions = {
    clientId: id,
    clean: true,
    connectTimeout: 10_000,
    // Reconnect during the run like a real device would; replies missed meanwhile count as lost.
    reconnectPeriod: 1_000,
  };
  if (opts.username !== undefined) connectOpts.username = opts.username;
  if (opts.password !== undefined) connectOpts.password = opts.password;
  // No retries for the first connect: a wrong URL or credentials should fail the run at once.
  const client = await mqtt.connectAsync(opts.url, connectOpts, false);
  disableNagle(client);
  client.on('connect', () => disableNagle(client));
  try {
    client.on('message', (topic, payload) => onMessage(id, topic, payload));
    // Replies published before the subscription exists would be dropped, so subscribe first.
    const filters = { [topics.result(id)]: { qos: 1 as const }, ...(opts.stream ? { [topics.stream(id)]: { qos: 0 as const } } : {}) };
    const grants = await client.subscribeAsync(filters);
    const refused = grants.find((g) => g.qos === 128);
    if (refused !== undefined) throw new Error(`subscription to ${refused.topic} refused by the broker`);
  } catch (err) {
    client.end(true);
    throw err;
  }
  client.on('error', () => {
    // Reconnects report errors here; without a listener they would crash the process.
  });
  return client;
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
    question === undefined
      ? `device ${deviceId} request ${seq}: is part ${seq} within tolerance?`
      : `question ${question}: is the part within tolerance?`;
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
