// Streaming for the upstream simulator (`"stream": true` on a chat call): the answer a
// non-streaming call would get, sent as OpenAI's server-sent events (`chat.completion.chunk`
// objects, then `data: [DONE]`), one chunk every `streamChunkMs`, with the usage in a last
// chunk when `stream_options.include_usage` asks for it. A scripted step can break the
// stream after some chunks: drop the connection, hang, or send an event that is not JSON.
import type { ServerResponse } from 'node:http';
import { later } from './http.js';
import { isRecord } from './openai.js';
import { bump, type SimStats } from './stats.js';

/** How a stream ends early, after `after` chunks. */
export type StreamBreak = { after: number; then: 'drop' | 'hang' | 'malformed' };

/** Characters of content per chunk. */
const CHUNK_CHARS = 8;

interface Completion {
  id: string;
  created: number;
  model: string;
  choices: Array<{ index: number; message: { content: string | null; tool_calls?: unknown[] }; finish_reason: string }>;
  usage: unknown;
}

/** The events of a completion, in order, as the JSON of each `data:` line. */
export function streamEvents(completion: Completion, includeUsage: boolean): string[] {
  const head = { id: completion.id, object: 'chat.completion.chunk', created: completion.created, model: completion.model };
  const chunk = (index: number, delta: unknown, finish: string | null): string =>
    JSON.stringify({ ...head, choices: [{ index, delta, finish_reason: finish, logprobs: null }] });
  const events: string[] = [];
  for (const choice of completion.choices) {
    events.push(chunk(choice.index, { role: 'assistant', content: '' }, null));
    const text = choice.message.content ?? '';
    for (let i = 0; i < text.length; i += CHUNK_CHARS) events.push(chunk(choice.index, { content: text.slice(i, i + CHUNK_CHARS) }, null));
    (choice.message.tool_calls ?? []).forEach((call, callIndex) => {
      if (!isRecord(call) || !isRecord(call.function)) return;
      const args = String(call.function.arguments ?? '');
      events.push(
        chunk(choice.index, { tool_calls: [{ index: callIndex, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }] }, null),
      );
      for (let i = 0; i < args.length; i += CHUNK_CHARS) {
        events.push(chunk(choice.index, { tool_calls: [{ index: callIndex, function: { arguments: args.slice(i, i + CHUNK_CHARS) } }] }, null));
      }
    });
    events.push(chunk(choice.index, {}, choice.finish_reason));
  }
  if (includeUsage) events.push(JSON.stringify({ ...head, choices: [], usage: completion.usage }));
  return events;
}

/** Sends the events one every `chunkMs`, then `[DONE]`; or breaks off as `broken` says. */
export function sendStream(stats: SimStats, timers: Set<NodeJS.Timeout>, res: ServerResponse, events: string[], chunkMs: number, broken?: StreamBreak): void {
  bump(stats.byStatus, '200');
  if (res.destroyed || res.writableEnded) return;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  res.flushHeaders();
  const send = (i: number): void => {
    if (res.destroyed || res.writableEnded) return;
    if (broken !== undefined && i === broken.after) {
      if (broken.then === 'drop') res.destroy();
      else if (broken.then === 'malformed') res.end('data: {"id": "chatcmpl-sim-broken", "choices": [\n\n');
      return; // 'hang': nothing more, the socket stays open
    }
    if (i === events.length) {
      res.end('data: [DONE]\n\n');
      return;
    }
    res.write(`data: ${events[i] as string}\n\n`);
    later(timers, chunkMs, () => send(i + 1));
  };
  send(0);
}

/** Whether a chat body asks for a stream, and for the usage at its end. */
export function streamRequest(body: Record<string, unknown>): { includeUsage: boolean } | undefined {
  if (body.stream !== true) return undefined;
  const options = body.stream_options;
  return { includeUsage: isRecord(options) && options.include_usage === true };
}
