// What the scheduler hands the upstream layer, and what it gets back. Kept apart from the
// implementations (ProviderChain, UpstreamClient) so both share one shape.
import type { Answer, Priority } from '../../contract/index.js';
import type { AttemptSpend } from './attempt-spend.js';
import type { InlineImage, UpstreamBody } from './body.js';
import type { OutputFormat } from './output-check.js';

export interface UpstreamCall {
  requestId: string;
  deviceId: string;
  /** For routing by priority (CONFIG_FILE `routing`). */
  priority: Priority;
  /** The model the request named, if any (body.model falls back to UPSTREAM_MODEL). */
  requestedModel: string | undefined;
  /**
   * Already built (see buildUpstreamBody): model + messages (chat) or input (embeddings) +
   * passthrough fields. The body decides the endpoint: with `input` it is POST
   * {baseUrl}/embeddings, else POST {baseUrl}/chat/completions. The chain replaces `model`
   * with the one its route and provider call for (see ProviderChain).
   */
  body: UpstreamBody;
  /** A raw camera image the body names by reference: its data URL goes in when the body is sent. */
  inline?: InlineImage | undefined;
  /**
   * A template's output: each provider is asked for it as it can take it (a strict json_schema
   * response format, or json_object and a system message: CONFIG_FILE `structuredOutputs`).
   */
  output?: OutputFormat | undefined;
  /** Extra headers, e.g. X-Lock-Key / X-Lock-Fence. */
  headers?: Record<string, string>;
  /** Epoch ms: no attempt may start at or after it. */
  deadline?: number;
  /**
   * Caps this call's counted attempts below the client's maxAttempts (never above it), e.g.
   * for a job taken over from a dead instance that already spent some. At least 1.
   */
  maxAttempts?: number;
  /**
   * Called before every HTTP request, 429 retries included (they count against rate limits
   * too), with the 1-based number of that request; awaited when it returns a promise. A throw
   * (or a rejection) stops the call and is rethrown as is.
   */
  beforeAttempt?: (attempt: number) => Promise<void> | undefined;
  /**
   * Called after every HTTP request that went out (the one beforeAttempt preceded) with what it
   * may have cost the upstream (attempt-spend.ts), so its rate-window reservation is settled
   * by what that attempt did. Not called for an attempt that never started or was aborted.
   */
  afterAttempt?: (spent: AttemptSpend) => void;
  /**
   * The whole chain is rate-limited: every provider that could take the call has all its keys
   * cooling after 429s. The argument is how long until the first of them may be used again.
   * Not called while another key or provider can take the call (the scheduler pauses all
   * dispatch fleet-wide on it, which one rate-limited key must not cause).
   */
  onRateLimited?: (retryAfterMs: number) => void;
  /** Aborts everything (shutdown). */
  signal?: AbortSignal;
  /**
   * Set for a chat call to be streamed: the upstream is asked for a stream (with the usage at
   * its end) and the first choice's text goes here as it arrives. The result is the whole
   * answer all the same.
   */
  stream?: StreamSink;
}

/** Where a streamed call's text goes as the upstream writes it. */
export interface StreamSink {
  /** The next piece of the first choice's text. */
  delta(text: string): void;
  /** An attempt that wrote text failed: what was written is void; another attempt may follow. */
  reset(): void;
}

/** The answer, and how it was obtained. */
export interface UpstreamResult extends Answer {
  /** Attempts that counted against maxAttempts (429 retries excluded), >= 1, across the whole chain. */
  attempts: number;
  /** Wall time of the successful attempt. */
  upstreamMs: number;
  /** The name of the provider that answered (`primary`, `fallback`, or a CONFIG_FILE name). */
  provider: string;
}
