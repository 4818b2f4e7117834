// The one place the bridge talks HTTP to an OpenAI-compatible upstream: retries, key
// rotation, 429 handling and deadlines live here so the scheduler only sees a result or a
// BridgeError with a contract code.
import { Pool } from 'undici';
import type { ChatMessage, Priority, Usage } from '../contract.js';
import { BridgeError } from '../errors.js';
import type { Logger } from '../logger.js';
import { backoffDelayMs, parseRetryAfterMs, type BackoffOptions } from './backoff.js';
import { KeyRing } from './keys.js';
import { parseCompletion, readError, truncate, type Completion } from './response.js';

export interface UpstreamClientOptions {
  /** e.g. `http://127.0.0.1:8080/v1`; the path prefix is kept: POST {baseUrl}/chat/completions. */
  baseUrl: string;
  /** May be empty: then no Authorization header is sent. */
  apiKeys: string[];
  /** Per attempt; covers waiting for a connection, connect, headers and body. */
  timeoutMs: number;
  maxAttempts: number;
  maxRateLimitedRetries: number;
  backoff?: BackoffOptions;
  /** Sockets kept to the upstream; pass MAX_CONCURRENCY (default 32, as in the contract). */
  connections?: number;
  /** Longest Retry-After honoured before retrying (default 60 s); a larger one is clamped. */
  maxRetryAfterMs?: number;
  /** Jitter source for backoff (default Math.random); injectable so tests can pin delays. */
  random?: () => number;
  logger: Logger;
}

export interface UpstreamCall {
  requestId: string;
  deviceId: string;
  /** For routing by priority (CONFIG_FILE `routing`). */
  priority: Priority;
  /** The model the request named, if any (body.model falls back to UPSTREAM_MODEL). */
  requestedModel: string | undefined;
  /** Already built (see buildUpstreamBody): model + messages + passthrough fields. */
  body: { model: string; messages: ChatMessage[]; [k: string]: unknown };
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
   * too, RELIABILITY A13), with the 1-based number of that request. A throw stops the call
   * and is rethrown as is.
   */
  beforeAttempt?: (attempt: number) => Promise<void>;
  /** A 429 arrived; the argument is how long the upstream asked us to wait. */
  onRateLimited?: (retryAfterMs: number) => void;
  /** Aborts everything (shutdown). */
  signal?: AbortSignal;
}

export interface UpstreamResult {
  model: string;
  content: string | null;
  finish_reason: string | null;
  usage?: Usage;
  /** Attempts that counted against maxAttempts (429 retries excluded), >= 1. */
  attempts: number;
  /** Wall time of the successful attempt. */
  upstreamMs: number;
}

const DEFAULT_BACKOFF: BackoffOptions = { baseMs: 200, maxMs: 5000 };
const DEFAULT_CONNECTIONS = 32;
const DEFAULT_MAX_RETRY_AFTER_MS = 60_000;
const UNDICI_TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/** What one HTTP request came to. */
type Outcome =
  | { kind: 'ok'; completion: Completion; ms: number }
  /** Retryable and counted: network error, timeout, 5xx, unusable 200. */
  | { kind: 'retry'; timeout: boolean; status?: number; message: string }
  /** 429: retried without using an attempt. */
  | { kind: 'rate_limited'; retryAfterMs: number | undefined; message: string }
  /** 401, or a 429 for an exhausted quota, which no wait clears: try another key. */
  | { kind: 'bad_key'; status: number; message: string }
  /** Any other status: the request itself is refused, retrying cannot help. */
  | { kind: 'fatal'; status: number; message: string };

type Failure = Exclude<Outcome, { kind: 'ok' } | { kind: 'rate_limited' }>;

function shuttingDown(): BridgeError {
  return new BridgeError('unavailable', 'bridge is shutting down');
}

function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw shuttingDown();
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(shuttingDown());
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(shuttingDown());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function errorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  return typeof err.code === 'string' ? err.code : undefined;
}

export class UpstreamClient {
  private readonly pool: Pool;
  private readonly path: string;
  private readonly keys: KeyRing;
  private readonly backoff: BackoffOptions;
  private readonly maxRetryAfterMs: number;
  private readonly random: () => number;
  private readonly logger: Logger;
  private closed = false;

  constructor(private readonly opts: UpstreamClientOptions) {
    const url = new URL(opts.baseUrl);
    // Keep the base URL's path (and query, for providers that version by it) in every request.
    this.path = `${url.pathname.replace(/\/+$/, '')}/chat/completions${url.search}`;
    this.pool = new Pool(url.origin, {
      connections: opts.connections ?? DEFAULT_CONNECTIONS,
      // Our per-attempt timer is the authority: it also covers the wait for a free socket.
      // undici's own timeouts sit just behind it as a backstop, so the failure we see is ours.
      headersTimeout: opts.timeoutMs + 1000,
      bodyTimeout: opts.timeoutMs + 1000,
      connect: { timeout: Math.min(opts.timeoutMs, 10_000) },
      // keepAliveTimeout stays at undici's short default: a POST on a socket the server just
      // closed is not retried by undici, so a stale socket would cost one of our attempts.
    });
    this.keys = new KeyRing(opts.apiKeys);
    this.backoff = opts.backoff ?? DEFAULT_BACKOFF;
    this.maxRetryAfterMs = opts.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS;
    this.random = opts.random ?? Math.random;
    this.logger = opts.logger;
  }

  async call(req: UpstreamCall): Promise<UpstreamResult> {
    if (this.closed) throw shuttingDown();
    const log = this.logger.child({ reqId: req.requestId, deviceId: req.deviceId });
    const payload = JSON.stringify(req.body);
    const { maxRateLimitedRetries } = this.opts;
    const maxAttempts = Math.max(1, Math.min(req.maxAttempts ?? this.opts.maxAttempts, this.opts.maxAttempts));

    let counted = 0; // attempts that count against maxAttempts
    let timeouts = 0; // of those, how many timed out
    let rateLimited = 0; // 429s so far
    let requests = 0; // HTTP requests made, 429s included
    let last: Failure | undefined;
    let lastRetryAfterMs: number | undefined;
    let keyIndex = this.keys.start();
    const badKeys = new Set<number>();
    let waitMs = 0;

    const exhausted = (why: string): BridgeError => {
      const lastMessage = last?.message ?? 'no attempt ran';
      const allTimedOut = counted > 0 && timeouts === counted;
      const plural = counted === 1 ? 'attempt' : 'attempts';
      return allTimedOut
        ? new BridgeError('upstream_timeout', `${why}: no answer within ${this.opts.timeoutMs} ms in ${counted} ${plural}`)
        : new BridgeError('upstream_error', `${why}: upstream failed after ${counted} ${plural}; last: ${lastMessage}`);
    };

    // The contract defines `expired` as "ttl_ms passed before an upstream call could start".
    // So it is only the answer while no counted attempt has run; 429s do not count, since the
    // upstream refused to start the work (and the contract says their wait counts against
    // ttl_ms). Once an attempt has run and failed, the deadline merely ends the retries and
    // the call fails with that failure's code (upstream_error / upstream_timeout), which tells
    // the device more than `expired` would.
    const checkDeadline = (startAt: number): void => {
      if (req.deadline === undefined || startAt < req.deadline) return;
      if (counted > 0) throw exhausted('ttl_ms passed before the next attempt could start');
      const note = rateLimited > 0 ? ` (upstream answered 429 ${rateLimited} times)` : '';
      throw new BridgeError('expired', `ttl_ms passed before an upstream call could start${note}`, lastRetryAfterMs);
    };

    for (;;) {
      if (waitMs > 0) {
        // Never sleep past the deadline: fail now rather than wake up too late to start.
        checkDeadline(Date.now() + waitMs);
        await sleep(waitMs, req.signal);
      }
      throwIfAborted(req.signal);
      checkDeadline(Date.now());
      requests += 1;
      if (req.beforeAttempt) await req.beforeAttempt(requests);
      throwIfAborted(req.signal);
      // beforeAttempt may have waited (rate-limit tokens, lock lease), so look again.
      checkDeadline(Date.now());

      log.debug({ attempt: counted + 1, request: requests, keyId: this.keys.idOf(keyIndex) }, 'upstream attempt');
      const outcome = await this.attempt(payload, req.body.model, this.headersFor(req, keyIndex), req.signal);

      if (outcome.kind === 'ok') {
        const { completion, ms } = outcome;
        log.debug({ attempts: counted + 1, upstreamMs: Math.round(ms) }, 'upstream answered');
        return { ...completion, attempts: counted + 1, upstreamMs: ms };
      }

      if (outcome.kind === 'rate_limited') {
        rateLimited += 1;
        const asked = outcome.retryAfterMs;
        waitMs = Math.min(asked ?? backoffDelayMs(rateLimited, this.backoff, this.random), this.maxRetryAfterMs);
        lastRetryAfterMs = waitMs;
        // Reported even when we give up: the fleet should still pause this upstream.
        req.onRateLimited?.(waitMs);
        if (rateLimited > maxRateLimitedRetries) {
          throw new BridgeError(
            'upstream_error',
            `upstream still rate-limited after ${maxRateLimitedRetries} retries: ${outcome.message}`,
            waitMs,
          );
        }
        // Another key may have budget left; with one key this is the same key.
        keyIndex = this.keys.after(keyIndex, badKeys) ?? keyIndex;
        log.warn(
          { status: 429, attempt: counted, rateLimited, delayMs: waitMs, retryAfter: asked !== undefined },
          'upstream rate-limited; retrying',
        );
        continue;
      }

      counted += 1;
      last = outcome;
      if (outcome.kind === 'retry' && outcome.timeout) timeouts += 1;

      if (outcome.kind === 'fatal') {
        log.warn({ status: outcome.status, attempt: counted }, 'upstream refused the request');
        throw new BridgeError('upstream_error', outcome.message);
      }

      if (outcome.kind === 'bad_key') {
        if (keyIndex !== undefined) badKeys.add(keyIndex);
        const next = this.keys.after(keyIndex, badKeys);
        if (next === undefined) {
          log.warn({ status: outcome.status, attempt: counted }, 'upstream refused every key');
          throw new BridgeError('upstream_error', outcome.message);
        }
        keyIndex = next;
        waitMs = 0; // a different key is a fresh start, not a struggling upstream
      } else {
        waitMs = backoffDelayMs(counted, this.backoff, this.random);
      }

      if (counted >= maxAttempts) {
        log.warn({ status: outcome.status, attempt: counted }, 'upstream attempts exhausted');
        throw exhausted('out of attempts');
      }
      log.warn(
        { status: outcome.status, attempt: counted, delayMs: waitMs, reason: outcome.message, keyId: this.keys.idOf(keyIndex) },
        'upstream attempt failed; retrying',
      );
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.close();
  }

  private headersFor(req: UpstreamCall, keyIndex: number | undefined): Record<string, string> {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers ?? {})) headers[name.toLowerCase()] = value;
    headers['content-type'] = 'application/json';
    headers['accept'] = 'application/json';
    const key = this.keys.key(keyIndex);
    if (key !== undefined) headers['authorization'] = `Bearer ${key}`;
    return headers;
  }

  /** One HTTP request, bounded by timeoutMs from start to the last body byte. */
  private async attempt(
    payload: string,
    model: string,
    headers: Record<string, string>,
    outer: AbortSignal | undefined,
  ): Promise<Outcome> {
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error(`attempt timed out after ${this.opts.timeoutMs} ms`));
    }, this.opts.timeoutMs);
    const onOuterAbort = (): void => controller.abort(outer?.reason);
    outer?.addEventListener('abort', onOuterAbort, { once: true });
    const started = performance.now();
    try {
      const res = await this.pool.request({ path: this.path, method: 'POST', headers, body: payload, signal: controller.signal });
      const text = await res.body.text();
      const ms = performance.now() - started;
      return this.classify(res.statusCode, res.headers['retry-after'], res.headers['retry-after-ms'], text, model, ms);
    } catch (err) {
      if (outer?.aborted) throw shuttingDown();
      if (timedOut || UNDICI_TIMEOUT_CODES.has(errorCode(err) ?? '')) {
        return { kind: 'retry', timeout: true, message: `no answer within ${this.opts.timeoutMs} ms` };
      }
      const message = err instanceof Error ? err.message : String(err);
      return { kind: 'retry', timeout: false, message: `network error: ${truncate(message)}` };
    } finally {
      clearTimeout(timer);
      outer?.removeEventListener('abort', onOuterAbort);
    }
  }

  private classify(
    status: number,
    retryAfter: string | string[] | undefined,
    retryAfterMsHeader: string | string[] | undefined,
    text: string,
    model: string,
    ms: number,
  ): Outcome {
    if (status >= 200 && status < 300) {
      const parsed = parseCompletion(text, model);
      if ('malformed' in parsed) return { kind: 'retry', timeout: false, status, message: `unusable answer: ${parsed.malformed}` };
      return { kind: 'ok', completion: parsed, ms };
    }
    const error = readError(text);
    const message = `upstream answered ${status}: ${error.message}`;
    if (status === 429) {
      // insufficient_quota does not clear with time (RELIABILITY A13): waiting is pointless.
      if (error.codes.includes('insufficient_quota')) return { kind: 'bad_key', status, message };
      return { kind: 'rate_limited', retryAfterMs: this.retryAfterMs(retryAfter, retryAfterMsHeader), message };
    }
    if (status === 401) return { kind: 'bad_key', status, message };
    if (status >= 500) return { kind: 'retry', timeout: false, status, message };
    return { kind: 'fatal', status, message };
  }

  /** Azure/OpenAI also send `retry-after-ms`, which is finer than Retry-After's seconds. */
  private retryAfterMs(retryAfter: string | string[] | undefined, retryAfterMs: string | string[] | undefined): number | undefined {
    const fine = Array.isArray(retryAfterMs) ? retryAfterMs[0] : retryAfterMs;
    if (fine !== undefined && /^\d+(\.\d+)?$/.test(fine.trim())) return Math.round(Number(fine.trim()));
    return parseRetryAfterMs(retryAfter);
  }
}
