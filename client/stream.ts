// A `stream` call as an async iterator of the text as the model writes it. It keeps the
// contract's promise on the device even when a chunk is lost (QoS 0): when the iteration ends,
// the deltas after the last reset, joined, are exactly the reply's content.
import type { OkReply } from '../contract/index.js';

export type StreamEvent = { delta: string } | { reset: true };

export class BridgeStream implements AsyncIterable<StreamEvent> {
  /** The text shown so far: the deltas since the last reset. */
  text = '';
  private nextSeq = 0;
  /** A chunk was missed since the last reset: the text has a hole the reply will mend. */
  private gap = false;
  private readonly events: StreamEvent[] = [];
  private ended = false;
  private failure: unknown;
  private wake: (() => void) | undefined;

  constructor(readonly reply: Promise<OkReply>) {
    reply.then(
      (ok) => this.finish(ok),
      (err: unknown) => this.end(err),
    );
  }

  /** A chunk of this request, in arrival order. */
  chunk(chunk: { seq: number; delta?: string; reset?: boolean }): void {
    if (this.ended) return;
    // seq 0 again: the request runs anew (a takeover after a crash) and its text starts afresh.
    if (chunk.seq === 0 && this.nextSeq > 0) {
      this.clear();
      this.nextSeq = 0;
    }
    if (chunk.seq < this.nextSeq) return; // a duplicate
    if (chunk.seq > this.nextSeq) this.gap = true;
    this.nextSeq = chunk.seq + 1;
    if (chunk.reset === true) this.clear();
    else if (typeof chunk.delta === 'string' && chunk.delta !== '') this.push({ delta: chunk.delta }, chunk.delta);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<StreamEvent> {
    for (;;) {
      const event = this.events.shift();
      if (event !== undefined) {
        yield event;
        continue;
      }
      if (this.ended) break;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
    if (this.failure !== undefined) throw this.failure;
  }

  private clear(): void {
    if (this.text !== '' || this.gap) this.push({ reset: true }, null);
    this.gap = false;
  }

  private push(event: StreamEvent, delta: string | null): void {
    this.text = delta === null ? '' : this.text + delta;
    this.events.push(event);
    this.wake?.();
  }

  /** The reply mends what the chunks missed: a reset and its whole content, when they differ. */
  private finish(reply: OkReply): void {
    const content = reply.content ?? '';
    if (this.gap || this.text !== content) {
      if (this.text !== '') this.push({ reset: true }, null);
      if (content !== '') this.push({ delta: content }, content);
    }
    this.end(undefined);
  }

  private end(failure: unknown): void {
    this.ended = true;
    this.failure = failure;
    this.wake?.();
  }
}
