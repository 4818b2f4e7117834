// Reading a streamed chat answer (`"stream": true`: OpenAI's `chat.completion.chunk` events,
// then `[DONE]`) back into the one completion a non-streaming call returns, handing the first
// choice's text on as it arrives. Tool-call arguments come in pieces too: they are joined here,
// so the reply carries whole calls.
import type { IncomingHttpHeaders } from 'node:http';
import { createParser, type EventSourceParser } from 'eventsource-parser';
import type { Choice, ToolCall, Usage } from '../../contract/index.js';
import type { BodyReader } from './exchange.js';
import { isRecord, parseJson, truncate, usageOf, type Completion } from './response.js';

interface ToolCallParts {
  id: string;
  name: string;
  arguments: string;
}

interface ChoiceParts {
  index: number;
  text: string;
  finish_reason: string | null;
  tools: Map<number, ToolCallParts>;
  logprobs: unknown[] | undefined;
}

export class StreamedAnswer {
  private model: string | undefined;
  private readonly choices = new Map<number, ChoiceParts>();
  private usage: Usage | undefined;
  private done = false;

  /** `onText` gets the first choice's text, piece by piece, in order. */
  constructor(private readonly onText: (text: string) => void) {}

  /** One event's `data`; a reason when the stream cannot be used (then the attempt failed). */
  add(data: string): string | undefined {
    if (this.done) return undefined;
    if (data === '[DONE]') {
      this.done = true;
      return undefined;
    }
    const event = parseJson(data);
    if (!isRecord(event)) return `malformed stream event: ${truncate(data, 60)}`;
    if (event['error'] !== undefined) return `upstream failed mid-stream: ${truncate(JSON.stringify(event['error']))}`;
    if (typeof event['model'] === 'string' && event['model'] !== '') this.model = event['model'];
    this.usage = usageOf(event['usage']) ?? this.usage;
    const choices = event['choices'];
    if (Array.isArray(choices)) for (const choice of choices) this.addChoice(choice);
    return undefined;
  }

  /** The whole answer once the stream ended; a reason when it ended before the answer did. */
  completion(requestedModel: string): Completion | { malformed: string } {
    const all = [...this.choices.values()].sort((a, b) => a.index - b.index).map(finished);
    const first = all[0];
    if (first === undefined) return { malformed: 'stream ended without an answer' };
    // Without [DONE], a stream is whole only when every choice said why it ended.
    if (!this.done && all.some((c) => c.finish_reason === null)) return { malformed: 'stream ended before the answer did' };
    const completion: Completion = { model: this.model ?? requestedModel, content: first.content, finish_reason: first.finish_reason };
    if (first.tool_calls) completion.tool_calls = first.tool_calls;
    if (first.logprobs !== undefined) completion.logprobs = first.logprobs;
    if (all.length > 1) completion.choices = all;
    if (this.usage) completion.usage = this.usage;
    return completion;
  }

  private addChoice(value: unknown): void {
    if (!isRecord(value) || typeof value['index'] !== 'number') return;
    const index = value['index'];
    let parts = this.choices.get(index);
    if (!parts) {
      parts = { index, text: '', finish_reason: null, tools: new Map(), logprobs: undefined };
      this.choices.set(index, parts);
    }
    const delta = value['delta'];
    if (isRecord(delta)) {
      const text = delta['content'];
      if (typeof text === 'string' && text !== '') {
        parts.text += text;
        if (index === 0) this.onText(text);
      }
      if (Array.isArray(delta['tool_calls'])) for (const call of delta['tool_calls']) addToolCall(parts.tools, call);
    }
    if (typeof value['finish_reason'] === 'string') parts.finish_reason = value['finish_reason'];
    const logprobs = value['logprobs'];
    if (isRecord(logprobs) && Array.isArray(logprobs['content'])) parts.logprobs = [...(parts.logprobs ?? []), ...(logprobs['content'] as unknown[])];
  }
}

/** A tool call's piece: the first names it (id, function name), the rest add to its arguments. */
function addToolCall(tools: Map<number, ToolCallParts>, value: unknown): void {
  if (!isRecord(value) || typeof value['index'] !== 'number') return;
  const fn = isRecord(value['function']) ? value['function'] : {};
  let call = tools.get(value['index']);
  if (!call) {
    call = { id: '', name: '', arguments: '' };
    tools.set(value['index'], call);
  }
  if (typeof value['id'] === 'string') call.id = value['id'];
  if (typeof fn['name'] === 'string') call.name += fn['name'];
  if (typeof fn['arguments'] === 'string') call.arguments += fn['arguments'];
}

/** A choice as the reply carries it: content null when the model wrote none (it called tools). */
function finished(parts: ChoiceParts): Choice {
  const choice: Choice = { index: parts.index, content: parts.text === '' ? null : parts.text, finish_reason: parts.finish_reason };
  const calls: ToolCall[] = [...parts.tools.entries()]
    .sort(([a], [b]) => a - b)
    .filter(([, c]) => c.id !== '' && c.name !== '')
    .map(([, c]) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
  if (calls.length > 0) choice.tool_calls = calls;
  if (parts.logprobs !== undefined) choice.logprobs = { content: parts.logprobs };
  return choice;
}

/** Reads a 2xx `text/event-stream` body as it arrives; any other body is left to be buffered. */
export class StreamReader implements BodyReader {
  readonly answer: StreamedAnswer;
  /** The body was a stream, read here (so there is no text to parse). */
  started = false;
  private readonly decoder = new TextDecoder();
  private readonly parser: EventSourceParser;
  private unusable: string | undefined;

  constructor(onText: (text: string) => void) {
    this.answer = new StreamedAnswer(onText);
    this.parser = createParser({
      onEvent: (event) => {
        this.unusable ??= this.answer.add(event.data);
      },
    });
  }

  start(status: number, headers: IncomingHttpHeaders): boolean {
    const type = headers['content-type'];
    this.started = status >= 200 && status < 300 && typeof type === 'string' && type.includes('text/event-stream');
    return this.started;
  }

  data(chunk: Buffer): string | undefined {
    // A character split across two chunks is held back by the decoder until it is whole.
    if (this.unusable === undefined) this.parser.feed(this.decoder.decode(chunk, { stream: true }));
    return this.unusable;
  }
}
