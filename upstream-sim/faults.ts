// Fault injection for the upstream simulator: revoked keys (401), models a key may not use
// (403), scripted one-shot steps,
// the rolling rate limit (429 with Retry-After), random hangs and random 500s; a call that
// meets none of them is answered after the configured latency.
import type { ServerResponse } from 'node:http';
import { later, send, sendRaw } from './http.js';
import { openAiError } from './openai.js';
import type { UpstreamSimSettings } from './options.js';
import { bump, type SimStats } from './stats.js';
import { sendStream, streamEvents, type StreamBreak } from './stream.js';

/**
 * One-shot behaviours for the next chat/embeddings calls, consumed in order. A scripted
 * call bypasses the random faults and the rate limiter (and is not counted by it):
 * - `{ status, body?, retryAfterS? }` answers at once with that status (an OpenAI error body by default);
 * - `{ hang: true }` never answers;
 * - `{ delayMs }` waits that long instead of the configured latency, then answers normally;
 * - `{ slowBodyMs }` sends the headers (200) at once and trickles a normal answer's body over that long;
 * - `{ malformed: true }` answers 200 with a body that is not valid JSON;
 * - `{ streamBreak: { after, then } }`, for a streaming call: after `after` chunks the stream
 *   drops its connection, hangs, or sends an event that is not JSON (stream.ts).
 */
export type FaultStep =
  | { status: number; body?: unknown; retryAfterS?: number }
  | { hang: true }
  | { delayMs: number }
  | { slowBodyMs: number }
  | { malformed: true }
  | { streamBreak: StreamBreak };

/** What fault handling reads and changes; fields are read on every call, so reset() and setOptions() apply at once. */
export interface FaultContext {
  readonly settings: UpstreamSimSettings;
  stats: SimStats;
  steps: FaultStep[];
  /** Arrival times of calls the limiter let through, oldest first. */
  window: number[];
  readonly timers: Set<NodeJS.Timeout>;
}

const RATE_WINDOW_MS = 60_000;

/** Valid JSON up to a point, then cut off: what a proxy that drops a connection mid-answer may hand over. */
const MALFORMED_BODY = '{"id":"chatcmpl-sim-malformed","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"sim';

function defaultErrorBody(status: number): unknown {
  if (status === 429) return openAiError('Rate limit reached (upstream-sim)', 'requests', 'rate_limit_exceeded');
  if (status === 401) return openAiError('Incorrect API key provided (upstream-sim)', 'invalid_request_error', 'invalid_api_key');
  if (status >= 500) return openAiError(`The server had an error (upstream-sim, ${status})`, 'server_error');
  return openAiError(`upstream-sim scripted status ${status}`, 'invalid_request_error');
}

/** Whether `key` ('' for none) may not use `model` (the refusedModels option). */
export function modelRefused(settings: UpstreamSimSettings, key: string, model: string): boolean {
  return settings.refusedModels.some((r) => r.model === model && (r.key === '*' || r.key === key));
}

/**
 * Answers a checked chat/embeddings call naming `model`. In order: a revoked key gets 401; a
 * model the key may not use gets 403; a scripted step
 * plays out; over the rate limit gets 429; a random hang; else, after the latency, a random
 * 500 or `answerBody()` (built only then, so it is as fresh as the answer).
 */
export function answerWithFaults(
  ctx: FaultContext,
  res: ServerResponse,
  key: string,
  model: string,
  answerBody: () => unknown,
  stream?: { includeUsage: boolean },
): void {
  const answer = (broken?: StreamBreak): void => {
    if (stream === undefined) send(ctx.stats, res, 200, answerBody());
    else
      sendStream(
        ctx.stats,
        ctx.timers,
        res,
        streamEvents(answerBody() as Parameters<typeof streamEvents>[0], stream.includeUsage),
        ctx.settings.streamChunkMs,
        broken,
      );
  };
  if (key !== '' && ctx.settings.revokedKeys.includes(key)) {
    send(ctx.stats, res, 401, defaultErrorBody(401));
    return;
  }
  if (modelRefused(ctx.settings, key, model)) {
    send(ctx.stats, res, 403, openAiError(`This API key may not use the model "${model}" (upstream-sim)`, 'invalid_request_error', 'model_not_allowed'));
    return;
  }
  const step = ctx.steps.shift();
  if (step !== undefined) {
    if ('streamBreak' in step) later(ctx.timers, latency(ctx.settings), () => answer(step.streamBreak));
    else playStep(ctx, res, step, answerBody, answer);
    return;
  }
  const retryAfterS = overLimit(ctx, Date.now());
  if (retryAfterS !== null) {
    send(ctx.stats, res, 429, defaultErrorBody(429), { 'retry-after': String(retryAfterS) });
    return;
  }
  if (ctx.settings.hangRate > 0 && Math.random() < ctx.settings.hangRate) {
    hang(ctx, res);
    return;
  }
  const fail = ctx.settings.errorRate > 0 && Math.random() < ctx.settings.errorRate;
  later(ctx.timers, latency(ctx.settings), () => (fail ? send(ctx.stats, res, 500, defaultErrorBody(500)) : answer()));
}

/** One scripted step; `answer` sends the normal answer (streamed when the call asked for a stream). */
function playStep(
  ctx: FaultContext,
  res: ServerResponse,
  step: Exclude<FaultStep, { streamBreak: StreamBreak }>,
  answerBody: () => unknown,
  answer: () => void,
): void {
  if ('hang' in step) hang(ctx, res);
  else if ('delayMs' in step) later(ctx.timers, step.delayMs, answer);
  else if ('slowBodyMs' in step) trickle(ctx, res, answerBody(), step.slowBodyMs);
  else if ('malformed' in step) sendRaw(ctx.stats, res, 200, MALFORMED_BODY);
  else {
    const headers: Record<string, string> = step.retryAfterS !== undefined ? { 'retry-after': String(step.retryAfterS) } : {};
    send(ctx.stats, res, step.status, step.body ?? defaultErrorBody(step.status), headers);
  }
}

function latency(settings: UpstreamSimSettings): number {
  const jitter = settings.jitterMs > 0 ? (Math.random() * 2 - 1) * settings.jitterMs : 0;
  return Math.max(0, settings.latencyMs + jitter);
}

/** Seconds until a slot frees while over the limit; records the call in the window otherwise (null). */
function overLimit(ctx: FaultContext, now: number): number | null {
  const rpm = ctx.settings.rateLimitRpm;
  if (rpm === undefined) return null;
  const window = ctx.window;
  while (window.length > 0 && (window[0] as number) <= now - RATE_WINDOW_MS) window.shift();
  if (window.length >= rpm) {
    // A slot frees when enough of the oldest calls leave the window to bring it under rpm.
    const freeAt = (window[window.length - rpm] ?? now) + RATE_WINDOW_MS;
    return Math.max(1, Math.ceil((freeAt - now) / 1000));
  }
  window.push(now);
  return null;
}

function hang(ctx: FaultContext, res: ServerResponse): void {
  bump(ctx.stats.byStatus, 'hang');
  ctx.stats.hanging += 1;
  const counted = ctx.stats;
  // The counter belongs to the stats object current when the hang began, so reset() stays clean.
  res.on('close', () => {
    counted.hanging -= 1;
  });
}

/** Headers at once, then the body in pieces spread over `ms`. */
function trickle(ctx: FaultContext, res: ServerResponse, body: unknown, ms: number): void {
  bump(ctx.stats.byStatus, '200');
  if (res.destroyed || res.writableEnded) return;
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(bytes.length) });
  res.flushHeaders();
  const pieces = Math.max(2, Math.min(20, bytes.length));
  const size = Math.ceil(bytes.length / pieces);
  for (let i = 0; i < pieces; i += 1) {
    later(ctx.timers, (ms * (i + 1)) / pieces, () => {
      if (res.destroyed || res.writableEnded) return;
      const chunk = bytes.subarray(i * size, (i + 1) * size);
      if (i === pieces - 1) res.end(chunk);
      else res.write(chunk);
    });
  }
}
