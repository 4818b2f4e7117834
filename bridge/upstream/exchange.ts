// One HTTP exchange through undici's dispatch API, its whole body read into memory and the
// whole of it bounded by a deadline. This replaces `pool.request()` + `body.text()` on the
// request path: that route costs an AbortController, two abort listeners and a Readable body
// stream per attempt, and a request still waiting for a pooled socket cannot be given up on
// before it gets one.
import type { Dispatcher } from 'undici';
import type { IncomingHttpHeaders } from 'node:http';
import { offAbort, onAbort } from './on-abort.js';

export type Exchange =
  | { kind: 'response'; status: number; headers: IncomingHttpHeaders; text: string }
  /** The deadline passed first, whether the request was still waiting for a socket or not. */
  | { kind: 'timeout' }
  /** `outer` was aborted. */
  | { kind: 'aborted' }
  /** undici's own failure (connection, its own timeouts, a malformed response). */
  | { kind: 'error'; error: Error }
  /** A BodyReader stopped the body midway: it cannot be used. */
  | { kind: 'unusable'; message: string };

/**
 * Reads a body as it arrives instead of buffering it (a stream): `start` decides from the
 * status and headers; then `data` gets every piece and may stop the exchange with a reason.
 * A read body ends as a `response` with empty text.
 */
export interface BodyReader {
  start(status: number, headers: IncomingHttpHeaders): boolean;
  data(chunk: Buffer): string | undefined;
}

export interface ExchangeRequest {
  path: string;
  method: 'POST' | 'GET';
  headers: Record<string, string>;
  body?: string;
}

class BufferingHandler implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  private status = 0;
  private headers: IncomingHttpHeaders = {};
  private readonly chunks: Buffer[] = [];
  private done = false;
  private reading = false;
  timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly resolve: (outcome: Exchange) => void,
    private readonly outer: AbortSignal | undefined,
    readonly timeoutMs: number,
    private readonly reader: BodyReader | undefined,
  ) {}

  /** The outer signal fired (shutdown). */
  readonly aborted = (): void => this.finish({ kind: 'aborted' }, new Error('aborted'));

  /** Settles once; later callbacks (an abort's own error, a late end) are ignored. */
  finish(outcome: Exchange, abortReason?: Error): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    if (this.outer) offAbort(this.outer, this.aborted);
    if (abortReason !== undefined) this.controller?.abort(abortReason);
    this.resolve(outcome);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    // Given up on while it waited for a socket: abort as soon as undici lets us.
    if (this.done) controller.abort(new Error('given up before it was sent'));
    else this.controller = controller;
  }

  onResponseStart(_controller: Dispatcher.DispatchController, status: number, headers: IncomingHttpHeaders): void {
    this.status = status;
    this.headers = headers;
    this.reading = this.reader?.start(status, headers) ?? false;
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    // Given up on (timed out): what still arrives must not reach a reader whose text was voided.
    if (this.done) return;
    if (!this.reading) {
      this.chunks.push(chunk);
      return;
    }
    const unusable = this.reader?.data(chunk);
    if (unusable !== undefined) this.finish({ kind: 'unusable', message: unusable }, new Error(unusable));
  }

  onResponseEnd(): void {
    const text = this.chunks.length === 1 ? this.chunks[0]!.toString('utf8') : Buffer.concat(this.chunks).toString('utf8');
    this.finish({ kind: 'response', status: this.status, headers: this.headers, text });
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.finish({ kind: 'error', error });
  }
}

function timedOut(handler: BufferingHandler): void {
  handler.finish({ kind: 'timeout' }, new Error(`attempt timed out after ${handler.timeoutMs} ms`));
}

/** Never rejects: every way the exchange can end is an `Exchange`. */
export function exchange(
  dispatcher: Dispatcher,
  request: ExchangeRequest,
  timeoutMs: number,
  outer: AbortSignal | undefined,
  reader?: BodyReader,
): Promise<Exchange> {
  if (outer?.aborted) return Promise.resolve({ kind: 'aborted' });
  return new Promise((resolve) => {
    const handler = new BufferingHandler(resolve, outer, timeoutMs, reader);
    handler.timer = setTimeout(timedOut, timeoutMs, handler);
    if (outer) onAbort(outer, handler.aborted);
    try {
      dispatcher.dispatch(request, handler);
    } catch (err) {
      // Some dispatchers throw on a request they cannot send instead of reporting it.
      handler.finish({ kind: 'error', error: err instanceof Error ? err : new Error(String(err)) });
    }
  });
}
