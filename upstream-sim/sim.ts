// An OpenAI-compatible upstream for tests, the demo and benchmarks: deterministic answers,
// configurable latency, and fault injection (errors, 429s with Retry-After, hangs, slow
// bodies, malformed JSON, revoked keys) either at random rates or scripted one request at a
// time; GET /stats counts calls by status, path, model and key.
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PayloadTooLarge } from '../contract/index.js';

export interface UpstreamSimOptions {
  /** 0 picks a free port. */
  port: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Base answer latency; default 50. */
  latencyMs?: number;
  /** Latency varies uniformly by ± this much; default 0. */
  jitterMs?: number;
  /** Share of chat/embeddings calls answered 500, 0..1; default 0. */
  errorRate?: number;
  /** Calls per rolling 60 s window; over it: 429 with Retry-After. Unset = unlimited. */
  rateLimitRpm?: number;
  /** Share of chat/embeddings calls never answered (socket kept open until close()), 0..1; default 0. */
  hangRate?: number;
  /**
   * API keys this upstream refuses: a call with one of them is answered 401 (OpenAI's
   * invalid_api_key), before any scripted step or random fault. Default none.
   */
  revokedKeys?: string[];
}

export type UpstreamSimSettings = Required<Omit<UpstreamSimOptions, 'rateLimitRpm'>> & {
  rateLimitRpm: number | undefined;
};

export interface RecordedRequest {
  path: string;
  /** Lower-cased header names, as node gives them. */
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON body; null when the body was not valid JSON. */
  body: unknown;
  /** Epoch ms at arrival. */
  at: number;
  /** Epoch ms when the response was fully handed to the socket; unset while unanswered (or hanging). */
  answeredAt?: number;
}

/**
 * One-shot behaviours for the next chat/embeddings calls, consumed in order. A scripted
 * call bypasses the random faults and the rate limiter (and is not counted by it):
 * - `{ status, body?, retryAfterS? }` answers at once with that status (an OpenAI error body by default);
 * - `{ hang: true }` never answers;
 * - `{ delayMs }` waits that long instead of the configured latency, then answers normally;
 * - `{ slowBodyMs }` sends the headers (200) at once and trickles a normal answer's body over that long;
 * - `{ malformed: true }` answers 200 with a body that is not valid JSON.
 */
export type FaultStep =
  | { status: number; body?: unknown; retryAfterS?: number }
  | { hang: true }
  | { delayMs: number }
  | { slowBodyMs: number }
  | { malformed: true };

export interface SimStats {
  /** Every HTTP call except GET /stats itself. */
  total: number;
  /** By HTTP status as a string; `hang` for calls never answered. */
  byStatus: Record<string, number>;
  byPath: Record<string, number>;
  /** Chat/embeddings calls by requested model (`sim-model` when none). */
  byModel: Record<string, number>;
  /** By API key, identified by its last 4 characters only (`…abcd`); `none` without a key. */
  byKey: Record<string, number>;
  /** Calls currently hanging. */
  hanging: number;
}

export interface UpstreamSim {
  /** Base URL ending in /v1, e.g. http://127.0.0.1:PORT/v1 */
  url: string;
  port: number;
  /** Every chat/embeddings request received, in arrival order. */
  requests: RecordedRequest[];
  stats(): SimStats;
  script(...steps: FaultStep[]): void;
  setOptions(partial: Partial<Omit<UpstreamSimOptions, 'port' | 'host'>>): void;
  /** Forgets requests, stats, queued script steps and the rate window; options stay. */
  reset(): void;
  close(): Promise<void>;
}

export const DEFAULT_MODEL = 'sim-model';
export const EMBEDDING_MODEL = 'sim-embedding';
const EMBEDDING_DIMENSIONS = 8;
/** The largest `dimensions` the simulator honours (OpenAI's largest model has 3072). */
const MAX_EMBEDDING_DIMENSIONS = 4096;
const RATE_WINDOW_MS = 60_000;
// Big enough for camera frames as data URLs; bounded so a bad client cannot exhaust memory.
const MAX_BODY_BYTES = 32 * 1024 * 1024;

/** Checks option values; returns a message naming the first bad one, or null. */
export function checkUpstreamSimOptions(opts: Partial<UpstreamSimOptions>): string | null {
  const nonNegative = (name: string, v: number | undefined): string | null =>
    v === undefined || (Number.isFinite(v) && v >= 0) ? null : `${name} must be a non-negative number, got ${v}`;
  const share = (name: string, v: number | undefined): string | null =>
    v === undefined || (Number.isFinite(v) && v >= 0 && v <= 1) ? null : `${name} must be between 0 and 1, got ${v}`;
  if (opts.port !== undefined && !(Number.isInteger(opts.port) && opts.port >= 0 && opts.port <= 65535)) {
    return `port must be an integer from 0 to 65535, got ${opts.port}`;
  }
  if (opts.host !== undefined && opts.host.trim() === '') return 'host must not be empty';
  if (opts.revokedKeys !== undefined && !(Array.isArray(opts.revokedKeys) && opts.revokedKeys.every((k) => typeof k === 'string' && k !== ''))) {
    return 'revokedKeys must be a list of non-empty keys';
  }
  if (opts.rateLimitRpm !== undefined && !(Number.isInteger(opts.rateLimitRpm) && opts.rateLimitRpm > 0)) {
    return `rateLimitRpm must be a positive integer, got ${opts.rateLimitRpm}`;
  }
  return (
    nonNegative('latencyMs', opts.latencyMs) ??
    nonNegative('jitterMs', opts.jitterMs) ??
    share('errorRate', opts.errorRate) ??
    share('hangRate', opts.hangRate)
  );
}

interface ParsedBody {
  ok: boolean;
  value: unknown;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new PayloadTooLarge());
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function parseJson(text: string): ParsedBody {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false, value: null };
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Text of a message's content: a string, or the text parts of an OpenAI content array. */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part) => (isRecord(part) && part.type === 'text' && typeof part.text === 'string' ? part.text : ''))
    .filter((t) => t !== '')
    .join(' ');
}

function estimateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

function openAiError(message: string, type: string, code: string | null = null): unknown {
  return { error: { message, type, param: null, code } };
}

function defaultErrorBody(status: number): unknown {
  if (status === 429) return openAiError('Rate limit reached (upstream-sim)', 'requests', 'rate_limit_exceeded');
  if (status === 401) return openAiError('Incorrect API key provided (upstream-sim)', 'invalid_request_error', 'invalid_api_key');
  if (status >= 500) return openAiError(`The server had an error (upstream-sim, ${status})`, 'server_error');
  return openAiError(`upstream-sim scripted status ${status}`, 'invalid_request_error');
}

/**
 * Deterministic unit vector from a hash of the input, so equal inputs embed equally;
 * `dimensions` long (each further 16 components come from another hash of the input).
 */
export function simEmbedding(text: string, dimensions = EMBEDDING_DIMENSIONS): number[] {
  const raw: number[] = [];
  let digest = createHash('sha256').update(text).digest();
  for (let i = 0; i < dimensions; i++) {
    if (i > 0 && i % 16 === 0) digest = createHash('sha256').update(`${text}\u0000${i / 16}`).digest();
    raw.push(digest.readUInt16BE((i % 16) * 2) / 32767.5 - 1);
  }
  const norm = Math.hypot(...raw) || 1;
  return raw.map((v) => Math.round((v / norm) * 1e6) / 1e6);
}

function bearerKey(req: IncomingMessage): string {
  const auth = req.headers.authorization;
  const match = typeof auth === 'string' ? /^Bearer\s+(.+)$/i.exec(auth.trim()) : null;
  return match?.[1]?.trim() ?? '';
}

function keyLabel(req: IncomingMessage): string {
  const key = bearerKey(req);
  // Only a suffix, so stats output can be shared without leaking credentials.
  return key === '' ? 'none' : `…${key.slice(-4)}`;
}

/** Valid JSON up to a point, then cut off: what a proxy that drops a connection mid-answer may hand over. */
const MALFORMED_BODY = '{"id":"chatcmpl-sim-malformed","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"sim';

function bump(record: Record<string, number>, key: string): void {
  record[key] = (record[key] ?? 0) + 1;
}

function emptyStats(): SimStats {
  return { total: 0, byStatus: {}, byPath: {}, byModel: {}, byKey: {}, hanging: 0 };
}

export async function startUpstreamSim(opts: UpstreamSimOptions): Promise<UpstreamSim> {
  const problem = checkUpstreamSimOptions(opts);
  if (problem !== null) throw new RangeError(problem);

  const settings: UpstreamSimSettings = {
    port: opts.port,
    host: opts.host ?? '127.0.0.1',
    latencyMs: opts.latencyMs ?? 50,
    jitterMs: opts.jitterMs ?? 0,
    errorRate: opts.errorRate ?? 0,
    rateLimitRpm: opts.rateLimitRpm,
    hangRate: opts.hangRate ?? 0,
    revokedKeys: opts.revokedKeys ?? [],
  };
  const requests: RecordedRequest[] = [];
  let stats = emptyStats();
  let steps: FaultStep[] = [];
  // Arrival times of calls the limiter let through, oldest first.
  let window: number[] = [];
  let completionSeq = 0;
  const timers = new Set<NodeJS.Timeout>();
  let closed = false;

  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
    bump(stats.byStatus, String(status));
    if (res.destroyed || res.writableEnded) return;
    const text = JSON.stringify(body);
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(text)),
      ...headers,
    });
    res.end(text);
  };

  const sendRaw = (res: ServerResponse, status: number, text: string): void => {
    bump(stats.byStatus, String(status));
    if (res.destroyed || res.writableEnded) return;
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
    res.end(text);
  };

  /** Headers at once, then the body in pieces spread over `ms`. */
  const trickle = (res: ServerResponse, body: unknown, ms: number): void => {
    bump(stats.byStatus, '200');
    if (res.destroyed || res.writableEnded) return;
    const bytes = Buffer.from(JSON.stringify(body));
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(bytes.length) });
    res.flushHeaders();
    const pieces = Math.max(2, Math.min(20, bytes.length));
    const size = Math.ceil(bytes.length / pieces);
    for (let i = 0; i < pieces; i += 1) {
      later((ms * (i + 1)) / pieces, () => {
        if (res.destroyed || res.writableEnded) return;
        const chunk = bytes.subarray(i * size, (i + 1) * size);
        if (i === pieces - 1) res.end(chunk);
        else res.write(chunk);
      });
    }
  };

  const later = (ms: number, fn: () => void): void => {
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    timers.add(t);
  };

  const hang = (res: ServerResponse): void => {
    bump(stats.byStatus, 'hang');
    stats.hanging += 1;
    const counted = stats;
    // The counter belongs to the stats object current when the hang began, so reset() stays clean.
    res.on('close', () => {
      counted.hanging -= 1;
    });
  };

  const latency = (): number => {
    const jitter = settings.jitterMs > 0 ? (Math.random() * 2 - 1) * settings.jitterMs : 0;
    return Math.max(0, settings.latencyMs + jitter);
  };

  /** 429 with Retry-After while over the limit; records the call in the window otherwise. */
  const overLimit = (now: number): number | null => {
    const rpm = settings.rateLimitRpm;
    if (rpm === undefined) return null;
    while (window.length > 0 && (window[0] as number) <= now - RATE_WINDOW_MS) window.shift();
    if (window.length >= rpm) {
      // A slot frees when enough of the oldest calls leave the window to bring it under rpm.
      const freeAt = (window[window.length - rpm] ?? now) + RATE_WINDOW_MS;
      return Math.max(1, Math.ceil((freeAt - now) / 1000));
    }
    window.push(now);
    return null;
  };

  const chatAnswer = (body: Record<string, unknown>): unknown => {
    const model = typeof body.model === 'string' && body.model !== '' ? body.model : DEFAULT_MODEL;
    const messages = Array.isArray(body.messages) ? body.messages : [];
    const lastUser = [...messages].reverse().find((m) => isRecord(m) && m.role === 'user');
    const question = isRecord(lastUser) ? contentText(lastUser.content) : '';
    const content = `sim answer to: ${question.slice(0, 80)}`;
    const promptText = messages.map((m) => (isRecord(m) ? contentText(m.content) : '')).join('\n');
    const promptTokens = estimateTokens(promptText);
    const completionTokens = estimateTokens(content);
    completionSeq += 1;
    return {
      id: `chatcmpl-sim-${completionSeq}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model,
      choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop', logprobs: null }],
      usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
    };
  };

  const embeddingsAnswer = (body: Record<string, unknown>): unknown => {
    const model = typeof body.model === 'string' && body.model !== '' ? body.model : EMBEDDING_MODEL;
    const inputs = typeof body.input === 'string' ? [body.input] : (body.input as string[]);
    const tokens = inputs.reduce((acc, s) => acc + estimateTokens(s), 0);
    const dimensions = typeof body.dimensions === 'number' ? body.dimensions : EMBEDDING_DIMENSIONS;
    return {
      object: 'list',
      data: inputs.map((s, index) => ({ object: 'embedding', index, embedding: simEmbedding(s, dimensions) })),
      model,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    };
  };

  /** A 400 message when the body cannot be answered, else null. */
  const validate = (path: string, body: unknown): string | null => {
    if (!isRecord(body)) return 'request body must be a JSON object';
    if (body.model !== undefined && typeof body.model !== 'string') return "'model' must be a string";
    if (path === '/v1/chat/completions') {
      if (!Array.isArray(body.messages) || body.messages.length === 0) return "'messages' must be a non-empty array";
      return null;
    }
    if (
      body.dimensions !== undefined &&
      !(Number.isInteger(body.dimensions) && (body.dimensions as number) > 0 && (body.dimensions as number) <= MAX_EMBEDDING_DIMENSIONS)
    ) {
      return `'dimensions' must be an integer from 1 to ${MAX_EMBEDDING_DIMENSIONS}`;
    }
    const input = body.input;
    const ok =
      (typeof input === 'string' && input !== '') ||
      (Array.isArray(input) && input.length > 0 && input.every((s) => typeof s === 'string'));
    return ok ? null : "'input' must be a non-empty string or an array of strings";
  };

  const handleInference = async (req: IncomingMessage, res: ServerResponse, path: string): Promise<void> => {
    let text: string;
    try {
      text = await readBody(req);
    } catch (err) {
      if (err instanceof PayloadTooLarge) {
        send(res, 413, openAiError('request body too large', 'invalid_request_error'), { connection: 'close' });
      }
      return;
    }
    const parsed = parseJson(text);
    const record: RecordedRequest = { path, headers: { ...req.headers }, body: parsed.value, at: Date.now() };
    requests.push(record);
    res.once('finish', () => {
      record.answeredAt = Date.now();
    });
    const model = isRecord(parsed.value) && typeof parsed.value.model === 'string' ? parsed.value.model : null;
    bump(stats.byModel, model ?? (path === '/v1/embeddings' ? EMBEDDING_MODEL : DEFAULT_MODEL));

    if (!parsed.ok) {
      send(res, 400, openAiError('We could not parse the JSON body of your request.', 'invalid_request_error'));
      return;
    }
    const invalid = validate(path, parsed.value);
    if (invalid !== null) {
      send(res, 400, openAiError(invalid, 'invalid_request_error'));
      return;
    }
    const body = parsed.value as Record<string, unknown>;
    const answerBody = (): unknown => (path === '/v1/chat/completions' ? chatAnswer(body) : embeddingsAnswer(body));
    const answer = (): void => send(res, 200, answerBody());

    const key = bearerKey(req);
    if (key !== '' && settings.revokedKeys.includes(key)) {
      send(res, 401, defaultErrorBody(401));
      return;
    }

    const step = steps.shift();
    if (step !== undefined) {
      if ('hang' in step) hang(res);
      else if ('delayMs' in step) later(step.delayMs, answer);
      else if ('slowBodyMs' in step) trickle(res, answerBody(), step.slowBodyMs);
      else if ('malformed' in step) sendRaw(res, 200, MALFORMED_BODY);
      else {
        const headers: Record<string, string> = step.retryAfterS !== undefined ? { 'retry-after': String(step.retryAfterS) } : {};
        send(res, step.status, step.body ?? defaultErrorBody(step.status), headers);
      }
      return;
    }

    const retryAfterS = overLimit(Date.now());
    if (retryAfterS !== null) {
      send(res, 429, defaultErrorBody(429), { 'retry-after': String(retryAfterS) });
      return;
    }
    if (settings.hangRate > 0 && Math.random() < settings.hangRate) {
      hang(res);
      return;
    }
    const fail = settings.errorRate > 0 && Math.random() < settings.errorRate;
    later(latency(), () => (fail ? send(res, 500, defaultErrorBody(500)) : answer()));
  };

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const path = new URL(req.url ?? '/', 'http://sim').pathname;
    const method = req.method ?? 'GET';
    if (path === '/stats' && method === 'GET') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(stats));
      return;
    }
    stats.total += 1;
    bump(stats.byPath, path);
    bump(stats.byKey, keyLabel(req));

    const inference = path === '/v1/chat/completions' || path === '/v1/embeddings';
    if (inference && method === 'POST') {
      handleInference(req, res, path).catch((err: unknown) => {
        send(res, 500, openAiError(`upstream-sim bug: ${String(err)}`, 'server_error'));
      });
      return;
    }
    if (path === '/v1/models' && method === 'GET') {
      const model = (id: string): unknown => ({ id, object: 'model', created: 1_700_000_000, owned_by: 'upstream-sim' });
      send(res, 200, { object: 'list', data: [model(DEFAULT_MODEL), model(EMBEDDING_MODEL)] });
      return;
    }
    req.resume();
    if (inference || path === '/v1/models') {
      send(res, 405, openAiError(`method ${method} not allowed on ${path}`, 'invalid_request_error'), {
        allow: inference ? 'POST' : 'GET',
      });
      return;
    }
    send(res, 404, openAiError(`unknown path ${path}`, 'invalid_request_error', 'unknown_url'));
  };

  const server: Server = createServer(handle);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(settings.port, settings.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const hostForUrl = settings.host.includes(':') ? `[${settings.host}]` : settings.host;

  return {
    url: `http://${hostForUrl}:${port}/v1`,
    port,
    requests,
    stats: () => structuredClone(stats),
    script: (...more) => {
      steps.push(...more);
    },
    setOptions: (partial) => {
      const bad = checkUpstreamSimOptions(partial);
      if (bad !== null) throw new RangeError(bad);
      for (const [key, value] of Object.entries(partial)) {
        // An explicit undefined rateLimitRpm lifts the limit; other undefined values leave settings alone.
        if (value !== undefined || key === 'rateLimitRpm') Object.assign(settings, { [key]: value });
      }
    },
    reset: () => {
      requests.length = 0;
      stats = emptyStats();
      steps = [];
      window = [];
    },
    close: async () => {
      if (closed) return;
      closed = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      const done = new Promise<void>((resolve) => server.close(() => resolve()));
      // Hanging calls would otherwise hold close() open forever.
      server.closeAllConnections();
      await done;
    },
  };
}
