// The device's side of the bridge: one MQTT connection, one reply subscription, any number of
// requests in flight, each answered once, retried with its own id within its deadline.
import type { MqttClient, IPublishPacket } from 'mqtt';
import type { ErrorReply, OkReply } from '../contract/index.js';
import { topics } from '../contract/names.js';
import { Call, type CallHooks } from './call.js';
import { openConnection } from './connection.js';
import { BridgeRequestError } from './errors.js';
import { checkPriority, settingsOf, type CallOptions, type ClientSettings, type ConnectOptions } from './options.js';
import { imageRequest, jsonRequest, type AnyRequest, type ChatInput, type EmbeddingInput, type ImageInput, type Prepared } from './requests.js';
import { afterRefusal } from './retry.js';
import { BridgeStream } from './stream.js';

/** PUBACK reasons after which no reply will come: the broker dropped the request. */
const PUBLISH_REFUSED = new Set([0x87, 0x8f, 0x90, 0x95]);
/** mqtt.js's errors for a publish cut off by the connection's end: it goes out again on reconnect. */
const CONNECTION_ENDED = /connection closed|client disconnecting/i;

export type BatchResult = OkReply | BridgeRequestError;

export class BridgeClient {
  /** Where this connection's replies arrive: its MQTT 5 Response Topic, or the device's result topic. */
  readonly replyTopic: string;
  /** Every unsettled call, by id, whether it holds an in-flight slot or waits for one. */
  private readonly calls = new Map<string, Call>();
  /** Calls waiting for a slot, in call order (a settled one is skipped when its turn comes). */
  private readonly waiting: Call[] = [];
  private inFlight = 0;
  private streamTopic: Promise<void> | undefined;
  private closed = false;

  private constructor(
    private readonly mqtt: MqttClient,
    private readonly settings: ClientSettings,
    readonly deviceId: string,
    readonly protocolVersion: 4 | 5,
  ) {
    const suffix = settings.clientId.slice(deviceId.length + 1) || 'client';
    this.replyTopic = protocolVersion === 5 ? `devices/${deviceId}/rpc/${suffix}` : topics.result(deviceId);
    mqtt.on('message', (topic, payload, packet) => this.onMessage(topic, payload, packet));
    // mqtt.js has already connected once; this runs on every reconnect.
    mqtt.on('connect', () => this.onReconnect());
    // mqtt.js keeps reconnecting; an error event without a listener would throw.
    mqtt.on('error', () => undefined);
  }

  static async connect(options: ConnectOptions): Promise<BridgeClient> {
    const settings = settingsOf(options);
    const { mqtt, protocolVersion } = await openConnection(options, settings);
    const client = new BridgeClient(mqtt, settings, options.deviceId, protocolVersion);
    try {
      await client.subscribe(client.replyTopic);
    } catch (err) {
      await mqtt.endAsync(true);
      throw err;
    }
    return client;
  }

  get connected(): boolean {
    return this.mqtt.connected;
  }

  /** The mqtt.js connection, to watch its events or read other topics; publishing requests on it bypasses the client. */
  get connection(): MqttClient {
    return this.mqtt;
  }

  chat(request: ChatInput, options: CallOptions = {}): Promise<OkReply> {
    return this.request(request, options);
  }

  template(name: string, vars: Record<string, string | number> = {}, options: CallOptions & { id?: string } = {}): Promise<OkReply> {
    const { id, ...callOptions } = options;
    return this.request({ template: name, vars, ...(id !== undefined ? { id } : {}) }, callOptions);
  }

  embed(input: string | string[], options: CallOptions & Omit<Partial<EmbeddingInput>, 'input'> = {}): Promise<OkReply> {
    const { priority, timeoutMs, signal, ...fields } = options;
    return this.request({ ...fields, input } as EmbeddingInput, { priority, timeoutMs, signal });
  }

  async image(bytes: Uint8Array, options: ImageInput & CallOptions): Promise<OkReply> {
    const priority = options.priority ?? this.settings.priority;
    checkPriority(priority);
    return this.run(imageRequest(this.deviceId, priority, bytes, options, this.protocolVersion === 5), options, {});
  }

  /** Any request of the contract (chat, embeddings or template), as `chat` sends it. */
  async request(request: AnyRequest, options: CallOptions = {}): Promise<OkReply> {
    const priority = options.priority ?? this.settings.priority;
    checkPriority(priority);
    return this.run(jsonRequest(this.deviceId, priority, request), options, {});
  }

  /** A chat request with `"stream": true`: iterate its text, then await `.reply`. */
  stream(request: ChatInput, options: CallOptions = {}): BridgeStream {
    const priority = options.priority ?? this.settings.priority;
    checkPriority(priority);
    const prepared = jsonRequest(this.deviceId, priority, { ...request, stream: true });
    const hooks: CallHooks = {};
    const reply = this.subscribeStream().then(() => this.run(prepared, options, hooks));
    const stream = new BridgeStream(reply);
    hooks.onChunk = (chunk) => stream.chunk(chunk);
    return stream;
  }

  /** Several requests, at most `concurrency` at once; results in request order, each the reply or its error. */
  async batch(requests: AnyRequest[], options: CallOptions & { concurrency?: number } = {}): Promise<BatchResult[]> {
    const { concurrency = 8, ...callOptions } = options;
    const results: BatchResult[] = new Array<BatchResult>(requests.length);
    let next = 0;
    const worker = async (): Promise<void> => {
      for (let i = next++; i < requests.length; i = next++) {
        try {
          results[i] = await this.request(requests[i] as AnyRequest, callOptions);
        } catch (err) {
          if (!(err instanceof BridgeRequestError)) throw err; // a malformed request is the caller's bug
          results[i] = err;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, requests.length)) }, worker));
    return results;
  }

  /** Fails every unanswered call with `closed` and ends the connection. */
  async close(): Promise<void> {
    this.closed = true;
    for (const call of [...this.calls.values()]) call.fail('closed', 'the client was closed');
    this.waiting.length = 0;
    await this.mqtt.endAsync();
  }

  private run(prepared: Prepared, options: CallOptions, hooks: CallHooks): Promise<OkReply> {
    if (this.closed) return Promise.reject(new BridgeRequestError('closed', 'the client was closed', { requestId: prepared.id, attempts: 0 }));
    // Two calls with one id would share one reply: the caller's bug, said at once.
    if (this.calls.has(prepared.id)) {
      return Promise.reject(new TypeError(`a call with id ${prepared.id} is already in flight`));
    }
    const timeoutMs = options.timeoutMs ?? this.settings.timeoutMs;
    const call = new Call(prepared.id, Date.now() + timeoutMs, prepared.build, hooks, (c) =>
      c.fail('timeout', `no reply within ${timeoutMs} ms (${c.attempts} attempts)`),
    );
    const { signal } = options;
    if (signal?.aborted === true) call.fail('aborted', 'the call was aborted');
    signal?.addEventListener('abort', () => call.fail('aborted', 'the call was aborted'), { once: true });
    void call.promise.then(
      () => this.release(call),
      () => this.release(call),
    );
    // While the connection is down, calls never yet published (waiting for it or for a slot) are the offline buffer.
    if (!this.mqtt.connected && this.unpublished() >= this.settings.offlineBuffer) {
      call.fail('offline', `the connection is down and ${this.settings.offlineBuffer} requests already wait for it`);
    }
    if (!call.done) {
      this.calls.set(call.id, call);
      this.admit(call);
    }
    return call.promise;
  }

  /** The call takes an in-flight slot, or waits for one in call order. */
  private admit(call: Call): void {
    if (this.inFlight >= this.settings.maxInFlight) {
      this.waiting.push(call);
      return;
    }
    this.inFlight += 1;
    this.send(call);
  }

  private release(call: Call): void {
    if (this.calls.get(call.id) !== call) return; // refused before it was admitted
    this.calls.delete(call.id);
    if (call.state === 'waiting') return; // it never took a slot
    this.inFlight -= 1;
    for (let next = this.waiting.shift(); next !== undefined; next = this.waiting.shift()) {
      if (next.done) continue;
      this.admit(next);
      return;
    }
  }

  private unpublished(): number {
    let n = 0;
    for (const call of this.calls.values()) if (call.state === 'waiting' || (call.state === 'unsent' && call.attempts === 0)) n += 1;
    return n;
  }

  /**
   * One attempt: published now, or on reconnect when the connection is down. `again`: the same
   * attempt published once more after a reconnect (its reply may have gone out meanwhile), not a
   * new one.
   */
  private send(call: Call, again = false): void {
    if (call.done) return;
    if (!this.mqtt.connected) {
      call.state = 'unsent';
      return;
    }
    if (!again && call.attempts >= this.settings.maxAttempts) return; // its last attempt's reply may still come
    call.state = 'sent';
    if (!again || call.attempts === 0) call.attempts += 1;
    const out = call.build(call.timeLeft());
    const properties =
      this.protocolVersion === 5
        ? {
            responseTopic: this.replyTopic,
            correlationData: call.correlation,
            ...(out.userProperties ? { userProperties: out.userProperties } : {}),
            ...(out.expirySeconds !== undefined ? { messageExpiryInterval: out.expirySeconds } : {}),
          }
        : undefined;
    this.mqtt.publish(out.topic, out.payload, { qos: this.settings.qos, ...(properties ? { properties } : {}) }, (err) => this.onPublished(call, err));
    // Sent again when no reply came in time, unless the deadline comes first.
    if (this.settings.attemptTimeoutMs < call.timeLeft()) call.after(this.settings.attemptTimeoutMs, () => this.send(call));
  }

  private onPublished(call: Call, err: (Error & { code?: unknown }) | null | undefined): void {
    if (!err) {
      if (call.state === 'sent') call.state = 'acked';
      return;
    }
    // A lost connection is made good on reconnect; a broker that dropped the request says why.
    if (typeof err.code === 'number' && PUBLISH_REFUSED.has(err.code)) call.fail('refused', `the broker refused the request: ${err.message}`, err.code);
    else if (this.mqtt.connected && err.code === undefined && !CONNECTION_ENDED.test(err.message))
      call.fail('refused', `the request could not be published: ${err.message}`);
  }

  private onReconnect(): void {
    for (const call of this.calls.values()) {
      if (call.state === 'unsent' || call.state === 'acked') this.send(call, true);
    }
  }

  private onMessage(topic: string, payload: Buffer, packet: IPublishPacket): void {
    if (topic === topics.stream(this.deviceId)) return this.onChunk(payload);
    if (topic !== this.replyTopic) return;
    const reply = parseReply(payload);
    if (reply === null) return;
    // MQTT 5: the correlation data names the call, even in a refusal whose id the bridge could not read.
    const correlation = packet.properties?.correlationData?.toString();
    const call = this.calls.get(correlation ?? reply.id ?? '');
    if (call === undefined || (reply.id !== call.id && !(correlation !== undefined && reply.id === null))) return; // not ours, or its caller gave up
    if (reply.ok) return call.resolve(reply);
    this.onRefusal(call, reply);
  }

  private onRefusal(call: Call, reply: ErrorReply): void {
    const next = afterRefusal(reply.error.code, call.attempts, reply.error.retry_after_ms);
    if (!next.retry || call.attempts >= this.settings.maxAttempts || next.waitMs >= call.timeLeft()) return call.refuse(reply);
    call.state = 'backoff';
    call.after(next.waitMs, () => this.send(call));
  }

  private onChunk(payload: Buffer): void {
    const chunk = parseJson(payload) as { id?: unknown; seq?: unknown } | null;
    if (chunk === null || typeof chunk.id !== 'string' || typeof chunk.seq !== 'number') return;
    this.calls.get(chunk.id)?.hooks.onChunk?.(chunk as { seq: number; delta?: string; reset?: boolean });
  }

  private subscribeStream(): Promise<void> {
    this.streamTopic ??= this.subscribe(topics.stream(this.deviceId));
    return this.streamTopic;
  }

  private async subscribe(topic: string): Promise<void> {
    const granted = await this.mqtt.subscribeAsync(topic, { qos: 1 });
    const refused = granted.find((g) => g.qos >= 0x80);
    if (refused !== undefined) throw new BridgeRequestError('refused', `the broker refused the subscription to ${topic}`, { requestId: '', attempts: 0 });
  }
}

function parseJson(payload: Buffer): unknown {
  try {
    const value: unknown = JSON.parse(payload.toString('utf8'));
    return typeof value === 'object' && value !== null ? value : null;
  } catch {
    return null;
  }
}

/** A reply is untrusted input: only an object with a string (or null) id and a boolean ok is one. */
function parseReply(payload: Buffer): OkReply | ErrorReply | null {
  const value = parseJson(payload) as { id?: unknown; ok?: unknown; error?: unknown } | null;
  if (value === null || typeof value.ok !== 'boolean' || !(typeof value.id === 'string' || value.id === null)) return null;
  if (value.ok === false && (typeof value.error !== 'object' || value.error === null)) return null;
  return value as OkReply | ErrorReply;
}
