// The fleet's devices as device code written with edge-ai-bridge/client (`--client`, and the
// demo's devices), so every demo runs the client. Retries are off: the simulator measures the
// bridge, and a retry would hide a reply it lost; each call's deadline is the reply timeout.
import { BridgeClient, BridgeConnectError, BridgeRequestError, type OkReply } from '../client/index.js';
import type { InferRequest, Priority } from '../contract/index.js';
import { loginOf } from './credentials.js';
import { describeConnectError } from './diagnosis.js';
import { watchDevice, type DeviceEvents } from './fleet-device.js';
import type { FleetOptions } from './fleet-options.js';

const CONNECT_TIMEOUT_MS = 10_000;
/** The fleet's rate decides what is in flight, not the client. */
const UNBOUNDED = 1_000_000;

export async function connectClient(opts: FleetOptions, id: string, replyTimeoutMs: number, events: DeviceEvents): Promise<BridgeClient> {
  const login = loginOf(opts, id);
  let bridge: BridgeClient;
  try {
    bridge = await BridgeClient.connect({
      url: opts.url,
      deviceId: id,
      clientId: id,
      ...login,
      protocolVersion: opts.mqtt5 === true ? 5 : 4,
      qos: opts.qos,
      connectTimeoutMs: CONNECT_TIMEOUT_MS,
      maxInFlight: UNBOUNDED,
      offlineBuffer: UNBOUNDED,
      timeoutMs: replyTimeoutMs,
      attemptTimeoutMs: replyTimeoutMs,
      maxAttempts: 1,
    });
  } catch (err) {
    // describeConnectError reads a CONNACK code, or the socket's error code (ECONNREFUSED…).
    const cause =
      err instanceof BridgeConnectError ? (err.reasonCode !== undefined ? { code: err.reasonCode, message: err.message } : (err.cause ?? err)) : err;
    throw new Error(describeConnectError(cause, opts.url, login.username), { cause: err });
  }
  await watchDevice(bridge.connection, id, events);
  return bridge;
}

/** What one call ended in, for the run's tally. */
export type ClientOutcome =
  | { kind: 'reply'; reply: OkReply | BridgeRequestError }
  | { kind: 'lost' }
  | { kind: 'refused'; reasonCode: number | undefined; message: string }
  | { kind: 'gone' };

export interface ClientCall {
  request: InferRequest;
  priority: Priority;
  /** A stream's first delta. */
  onFirstChunk: () => void;
}

/** Sends one request the way the run asks (chat, image or stream) and reports how it ended. */
export async function callWithClient(bridge: BridgeClient, opts: FleetOptions, seq: number, call: ClientCall): Promise<ClientOutcome> {
  const { request, priority } = call;
  try {
    const reply = opts.images
      ? await bridge.image(opts.images.frame(seq), { template: opts.images.template, id: request.id, priority })
      : opts.stream === true
        ? await streamed(bridge, request, priority, call.onFirstChunk)
        : await bridge.request(request, { priority });
    return { kind: 'reply', reply };
  } catch (err) {
    if (!(err instanceof BridgeRequestError)) throw err;
    if (err.code === 'timeout') return { kind: 'lost' };
    if (err.code === 'refused') return { kind: 'refused', reasonCode: err.reasonCode, message: err.message };
    if (err.code === 'closed' || err.code === 'offline' || err.code === 'aborted') return { kind: 'gone' };
    return { kind: 'reply', reply: err };
  }
}

async function streamed(bridge: BridgeClient, request: InferRequest, priority: Priority, onFirstChunk: () => void): Promise<OkReply> {
  const stream = bridge.stream(request as Parameters<BridgeClient['stream']>[0], { priority });
  let first = true;
  for await (const event of stream) {
    if (first && 'delta' in event) onFirstChunk();
    first = false;
  }
  return stream.reply;
}
