// A streamed request's text on its way to the device: `{"id", "seq", "delta"}` chunks on
// devices/{id}/stream, batched so a fast model does not flood a constrained device (at most
// one publish per flushMs, sooner when flushBytes have gathered), and `{"id", "seq",
// "reset": true}` when the text shown so far is void. A preview only: the reply on the result
// topic stays the end of the request, so a chunk that cannot be published is not retried.
import { topics, type Publish, type StreamChunk } from '../../contract/index.js';
import type { Logger } from '../logger.js';

export interface StreamSettings {
  /** STREAM_FLUSH_MS: the shortest time between two chunks of one request (0: every piece at once). */
  flushMs: number;
  /** STREAM_FLUSH_BYTES: a chunk's delta holds at most this many bytes of UTF-8; gathered, they go at once. */
  flushBytes: number;
  /** STREAM_QOS. */
  qos: 0 | 1;
}

/** The upstream layer's StreamSink, by shape (results never imports upstream). */
export class StreamPublisher {
  private readonly topic: string;
  private seq = 0;
  private pending = '';
  private lastAt = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | undefined;
  /** Publishes go one after another, so chunks leave in seq order. */
  private sending: Promise<void> = Promise.resolve();
  private failed = false;

  constructor(
    private readonly publish: Publish,
    deviceId: string,
    private readonly id: string,
    private readonly settings: StreamSettings,
    private readonly log: Logger,
    private readonly clock: () => number = Date.now,
  ) {
    this.topic = topics.stream(deviceId);
  }

  delta(text: string): void {
    this.pending += text;
    if (Buffer.byteLength(this.pending) >= this.settings.flushBytes) {
      this.flush();
      return;
    }
    if (this.timer !== undefined) return;
    const waitMs = this.lastAt + this.settings.flushMs - this.clock();
    if (waitMs <= 0) this.flush();
    else this.timer = setTimeout(() => this.flush(), waitMs);
  }

  reset(): void {
    this.pending = '';
    this.stopTimer();
    this.send({ id: this.id, seq: this.seq++, reset: true });
  }

  /** Sends what is pending and waits until every chunk has left (before the reply goes). */
  async close(): Promise<void> {
    this.flush();
    await this.sending;
  }

  private flush(): void {
    this.stopTimer();
    if (this.pending === '') return;
    for (const delta of utf8Pieces(this.pending, this.settings.flushBytes)) this.send({ id: this.id, seq: this.seq++, delta });
    this.pending = '';
    this.lastAt = this.clock();
  }

  private stopTimer(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private send(chunk: StreamChunk): void {
    const payload = Buffer.from(JSON.stringify(chunk));
    const options = { qos: this.settings.qos, retain: false };
    this.sending = this.sending.then(() =>
      this.publish(this.topic, payload, options).catch((err: unknown) => {
        if (!this.failed) this.log.warn({ err, reqId: this.id }, 'could not publish a stream chunk; the reply follows all the same');
        this.failed = true;
      }),
    );
  }
}

/** `text` cut into pieces of at most `maxBytes` bytes of UTF-8, never inside a character. */
export function utf8Pieces(text: string, maxBytes: number): string[] {
  if (Buffer.byteLength(text) <= maxBytes) return [text];
  const pieces: string[] = [];
  let piece = '';
  let bytes = 0;
  for (const char of text) {
    const size = Buffer.byteLength(char);
    if (bytes + size > maxBytes) {
      pieces.push(piece);
      piece = '';
      bytes = 0;
    }
    piece += char;
    bytes += size;
  }
  if (piece !== '') pieces.push(piece);
  return pieces;
}
