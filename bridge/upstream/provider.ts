// One upstream provider: its settings, its own undici Pool (connection limit and timeouts)
// and its key ring. `attempt` is ONE HTTP request against it, classified into an Outcome;
// whether and where to retry is the chain's business (chain-call.ts).
import { Pool } from 'undici';
import { BridgeError } from '../../contract/index.js';
import { exchange } from './exchange.js';
import { AttemptStats } from './attempt-stats.js';
import { neverConnected } from './attempt-spend.js';
import { parseRetryAfterMs } from './backoff.js';
import { headerValue } from './header-value.js';
import { KeyProbe, type KeyVerdict } from './key-probe.js';
import { KeyRing } from './keys.js';
import { CHAT_SHAPE, parseAnswer, readError, truncate, type AnswerShape } from './response.js';
import { StreamReader } from './stream-response.js';
import type { Outcome } from './outcome.js';

export interface ProviderOptions {
  /** `primary`, `fallback` or a CONFIG_FILE provider name; in logs, replies' metadata and the breaker key. */
  name: string;
  /** e.g. `http://127.0.0.1:8080/v1`; the path prefix is kept: POST {baseUrl}/chat/completions (or /embeddings). */
  baseUrl: string;
  /** May be empty: then no Authorization header is sent. */
  apiKeys: readonly string[];
  /**
   * The chat model this provider uses unless a route names one (FALLBACK_MODEL, CONFIG_FILE
   * `model`). Never used for embeddings (see ProviderChain.modelFor).
   */
  model?: string | undefined;
  /** Per attempt: waiting for a socket, connect, headers and the whole body. */
  timeoutMs: number;
  /** TCP/TLS connect; default min(timeoutMs, 10 s). */
  connectTimeoutMs?: number | undefined;
  /** undici's own headers/body timeouts, a backstop behind timeoutMs; default timeoutMs + 1 s. */
  headersTimeoutMs?: number | undefined;
  bodyTimeoutMs?: number | undefined;
  /** Sockets kept to this provider (MAX_CONCURRENCY by default). */
  connections?: number | undefined;
  /** Takes `response_format` json_schema in strict mode; default true (CONFIG_FILE `structuredOutputs`). */
  structuredOutputs?: boolean | undefined;
}

const DEFAULT_CONNECTIONS = 32;
const UNDICI_TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
/** Statuses that say the request itself is wrong (malformed, unknown model, too large, unprocessable). */
const REQUEST_REFUSED = new Set([400, 404, 413, 422]);

export function shuttingDown(): BridgeError {
  return new BridgeError('unavailable', 'bridge is shutting down');
}

function errorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  return typeof err.code === 'string' ? err.code : undefined;
}

export class Provider {
  readonly name: string;
  readonly model: string | undefined;
  readonly timeoutMs: number;
  readonly structuredOutputs: boolean;
  readonly keys: KeyRing;
  /** Its attempts since the operator dashboard last looked. */
  readonly stats = new AttemptStats();
  private readonly pool: Pool;
  private readonly paths: Record<AnswerShape['kind'], string>;
  private readonly probe: KeyProbe;

  constructor(opts: ProviderOptions) {
    this.name = opts.name;
    this.model = opts.model;
    this.timeoutMs = opts.timeoutMs;
    this.structuredOutputs = opts.structuredOutputs ?? true;
    const url = new URL(opts.baseUrl);
    // Keep the base URL's path (and query, for providers that version by it) in every request.
    const base = url.pathname.replace(/\/+$/, '');
    this.paths = { chat: `${base}/chat/completions${url.search}`, embeddings: `${base}/embeddings${url.search}` };
    this.pool = new Pool(url.origin, {
      connections: opts.connections ?? DEFAULT_CONNECTIONS,
      // Our per-attempt timer is the authority: it also covers the wait for a free socket.
      // undici's own timeouts sit just behind it as a backstop, so the failure we see is ours.
      headersTimeout: opts.headersTimeoutMs ?? opts.timeoutMs + 1000,
      bodyTimeout: opts.bodyTimeoutMs ?? opts.timeoutMs + 1000,
      connect: { timeout: opts.connectTimeoutMs ?? Math.min(opts.timeoutMs, 10_000) },
      // keepAliveTimeout stays at undici's short default: a POST on a socket the server just
      // closed is not retried by undici, so a stale socket would cost one of our attempts.
    });
    this.keys = new KeyRing(opts.apiKeys);
    this.probe = new KeyProbe(this.pool, `${base}/models${url.search}`, opts.timeoutMs);
  }

  /** Whether key `index` itself is refused (GET {baseUrl}/models with it): see KeyProbe. */
  checkKey(index: number, model: string): Promise<KeyVerdict> {
    const key = this.keys.key(index);
    return this.probe.check(index, key === undefined ? undefined : `Bearer ${key}`, model);
  }

  /** The key was set aside: its next refusal, once it is back, is probed afresh. */
  forgetKeyVerdict(index: number): void {
    this.probe.forget(index);
  }

  /**
   * Request headers: the call's extra headers (lower-cased; values may come from devices, so
   * they are encoded: header-value.ts), JSON, and the key's bearer token.
   */
  headers(extra: Record<string, string> | undefined, keyIndex: number): Record<string, string> {
    const headers: Record<string, string> = {};
    if (extra) for (const name in extra) headers[name.toLowerCase()] = headerValue(extra[name] as string);
    headers['content-type'] = 'application/json';
    headers['accept'] = 'application/json';
    const key = this.keys.key(keyIndex);
    if (key !== undefined) headers['authorization'] = `Bearer ${key}`;
    return headers;
  }

  /**
   * One HTTP request, bounded by timeoutMs from start (the wait for a pooled socket
   * included) to the last body byte: to /chat/completions, or to /embeddings for an
   * embeddings `shape`, whose answer is read as one. With `onText` (a chat payload asking
   * for a stream), a streamed answer is read as it arrives and its first choice's text handed
   * to `onText`; the outcome is the whole answer all the same. Never throws except for the
   * outer abort (shutdown), which becomes `unavailable`.
   */
  async attempt(
    payload: string,
    model: string,
    headers: Record<string, string>,
    outer: AbortSignal | undefined,
    shape: AnswerShape = CHAT_SHAPE,
    onText?: (text: string) => void,
  ): Promise<Outcome> {
    const started = performance.now();
    const outcome = await this.exchangeOnce(payload, model, headers, outer, shape, started, onText);
    this.stats.record(outcome.kind, performance.now() - started);
    return outcome;
  }

  private async exchangeOnce(
    payload: string,
    model: string,
    headers: Record<string, string>,
    outer: AbortSignal | undefined,
    shape: AnswerShape,
    started: number,
    onText?: (text: string) => void,
  ): Promise<Outcome> {
    const reader = onText && shape.kind === 'chat' ? new StreamReader(onText) : undefined;
    if (reader) headers['accept'] = 'text/event-stream';
    const request = { path: this.paths[shape.kind], method: 'POST' as const, headers, body: payload };
    const result = await exchange(this.pool, request, this.timeoutMs, outer, reader);
    if (result.kind === 'aborted') throw shuttingDown();
    if (result.kind === 'unusable') return { kind: 'retry', timeout: false, status: 200, message: scrubbed(`unusable stream: ${result.message}`, headers) };
    // undici's own timeouts sit just behind ours (see the Pool): either way the attempt timed out.
    const code = result.kind === 'error' ? errorCode(result.error) : undefined;
    if (result.kind === 'timeout' || UNDICI_TIMEOUT_CODES.has(code ?? '')) {
      return { kind: 'retry', timeout: true, message: `no answer within ${this.timeoutMs} ms` };
    }
    if (result.kind === 'error') {
      const message = result.error.message;
      // undici refused to send it (a header or body it cannot carry): the request's fault.
      if (code === 'UND_ERR_INVALID_ARG') return { kind: 'invalid', message: `the request cannot be sent upstream: ${truncate(message)}` };
      const detail = code !== undefined && !message.includes(code) ? `${code} ${message}` : message;
      const retry = { kind: 'retry', timeout: false, message: `network error: ${truncate(detail)}` } as const;
      return neverConnected(code) ? { ...retry, unsent: true } : retry;
    }
    const ms = performance.now() - started;
    if (reader?.started) return this.streamed(reader, model, ms, headers);
    return this.classify(result.status, result.headers['retry-after'], result.headers['retry-after-ms'], result.text, model, ms, shape, headers);
  }

  /** A 2xx stream that ended: its whole answer, or why it cannot be used. */
  private streamed(reader: StreamReader, model: string, ms: number, headers: Record<string, string>): Outcome {
    const parsed = reader.answer.completion(model);
    if (!('malformed' in parsed)) return { kind: 'ok', completion: parsed, ms };
    return { kind: 'retry', timeout: false, status: 200, message: scrubbed(`unusable stream: ${parsed.malformed}`, headers) };
  }

  async close(): Promise<void> {
    await this.pool.close();
  }

  private classify(
    status: number,
    retryAfter: string | string[] | undefined,
    retryAfterMsHeader: string | string[] | undefined,
    text: string,
    model: string,
    ms: number,
    shape: AnswerShape,
    headers: Record<string, string>,
  ): Outcome {
    if (status >= 200 && status < 300) {
      const parsed = parseAnswer(text, model, shape);
      if (!('malformed' in parsed)) return { kind: 'ok', completion: parsed, ms };
      return { kind: 'retry', timeout: false, status, message: scrubbed(`unusable answer (${status}): ${parsed.malformed}`, headers) };
    }
    const scrub = (s: string): string => scrubbed(s, headers);
    const error = readError(scrub(text));
    const message = `upstream answered ${status}: ${scrub(error.message)}`;
    if (status === 429) {
      // insufficient_quota does not clear with time: waiting is pointless.
      if (error.codes.includes('insufficient_quota')) return { kind: 'bad_key', status, message };
      return { kind: 'rate_limited', retryAfterMs: retryAfterMs(retryAfter, retryAfterMsHeader), message };
    }
    if (status === 401 || status === 403) return { kind: 'key_refused', status, message };
    // A 404 that is not the API's own error is a path the provider does not serve (a wrong
    // base URL): the provider's fault, not the request's.
    if (status === 404 && !error.fromApi) return { kind: 'retry', timeout: false, status, message: `${message} (not an API error: is the base URL right?)` };
    if (REQUEST_REFUSED.has(status)) return { kind: 'invalid', status, message: `the upstream refused the request: ${status} ${scrub(error.message)}` };
    if (status >= 500) return { kind: 'retry', timeout: false, status, message };
    return { kind: 'fatal', status, message };
  }
}

/**
 * Some upstreams echo the key they were sent in error messages; those messages reach logs,
 * error replies and the dead-letter list, so the key is cut out of them first.
 */
function scrubbed(text: string, headers: Record<string, string>): string {
  const key = /^Bearer (.+)$/.exec(headers['authorization'] ?? '')?.[1];
  return key ? text.split(key).join('[redacted]') : text;
}

/** Azure/OpenAI also send `retry-after-ms`, which is finer than Retry-After's seconds. */
function retryAfterMs(retryAfter: string | string[] | undefined, retryAfterMsHeader: string | string[] | undefined): number | undefined {
  const fine = Array.isArray(retryAfterMsHeader) ? retryAfterMsHeader[0] : retryAfterMsHeader;
  if (fine !== undefined && /^\d+(\.\d+)?$/.test(fine.trim())) return Math.round(Number(fine.trim()));
  return parseRetryAfterMs(retryAfter);
}
