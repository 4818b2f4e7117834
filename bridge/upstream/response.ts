// Reading an OpenAI-compatible answer. Kept apart from the HTTP loop so the loop only
// decides *whether* to retry, never how to pick a body apart.
import type { Answer, Choice, ToolCall, Usage } from '../../contract/index.js';
import type { UpstreamResult } from './call.js';

/** A usable answer read from the upstream's body. */
export type Completion = Answer;

/** What an attempt asks for, so its answer is read accordingly. */
export type AnswerShape =
  | { kind: 'chat' }
  /** `single`: the input was one string (reply `embedding`), else an array of `count` strings (reply `embeddings`). */
  | { kind: 'embeddings'; single: boolean; count: number };

export const CHAT_SHAPE: AnswerShape = { kind: 'chat' };

const MAX_MESSAGE_CHARS = 200;

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export function truncate(text: string, max = MAX_MESSAGE_CHARS): string {
  const oneLine = text.replace(/\s+/g, ' ').trim();
  return oneLine.length > max ? `${oneLine.slice(0, max)}…` : oneLine;
}

/** A 200 answer as a completion, or a reason it cannot be used (then the attempt failed). */
export function parseCompletion(text: string, requestedModel: string): Completion | { malformed: string } {
  if (text.trim() === '') return { malformed: 'answer body is empty' };
  const json = parseJson(text);
  if (json === undefined) return { malformed: `answer is not valid JSON: ${truncate(text, 60)}` };
  if (!isRecord(json)) return { malformed: 'answer is not a JSON object' };
  const choices = Array.isArray(json['choices']) ? json['choices'].map(choiceOf) : [];
  const first = choices[0];
  if (first === undefined) return { malformed: 'answer has no choices' };
  if ('malformed' in first) return first;
  const usage = usageOf(json['usage']);
  const completion: Completion = {
    model: typeof json['model'] === 'string' && json['model'] !== '' ? json['model'] : requestedModel,
    content: first.content,
    finish_reason: first.finish_reason,
  };
  if (first.tool_calls) completion.tool_calls = first.tool_calls;
  if (first.logprobs !== undefined) completion.logprobs = first.logprobs;
  if (choices.length > 1) {
    const all = choices.filter((c): c is Choice => !('malformed' in c));
    if (all.length !== choices.length) return { malformed: 'a choice has no message' };
    completion.choices = all;
  }
  if (usage) completion.usage = usage;
  return completion;
}

/** One choice of a chat answer: its text, why it ended, its tool calls and log probabilities. */
function choiceOf(value: unknown, index: number): Choice | { malformed: string } {
  const message = isRecord(value) ? value['message'] : undefined;
  if (!isRecord(value) || !isRecord(message)) return { malformed: index === 0 ? 'first choice has no message' : 'a choice has no message' };
  const { content } = message;
  const finish = value['finish_reason'];
  const choice: Choice = {
    index: typeof value['index'] === 'number' ? value['index'] : index,
    content: typeof content === 'string' ? content : null,
    finish_reason: typeof finish === 'string' ? finish : null,
  };
  const calls = Array.isArray(message['tool_calls']) ? message['tool_calls'].filter(isToolCall) : [];
  if (calls.length > 0) choice.tool_calls = calls;
  if (value['logprobs'] !== undefined && value['logprobs'] !== null) choice.logprobs = value['logprobs'];
  return choice;
}

function isToolCall(value: unknown): value is ToolCall {
  if (!isRecord(value) || typeof value['id'] !== 'string' || value['type'] !== 'function') return false;
  const fn = value['function'];
  return isRecord(fn) && typeof fn['name'] === 'string' && typeof fn['arguments'] === 'string';
}

const isCount = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);

/** The answer's token counts as UsageSchema reads them (three finite numbers, nothing else kept); undefined when they are not. */
export function usageOf(value: unknown): Usage | undefined {
  if (!isRecord(value)) return undefined;
  const { prompt_tokens: prompt, completion_tokens: completion, total_tokens: total } = value;
  if (!isCount(prompt) || !isCount(completion) || !isCount(total)) return undefined;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: total };
}

/** A 200 answer in the shape `shape` asks for, or a reason it cannot be used. */
export function parseAnswer(text: string, requestedModel: string, shape: AnswerShape): Completion | { malformed: string } {
  return shape.kind === 'chat' ? parseCompletion(text, requestedModel) : parseEmbeddings(text, requestedModel, shape);
}

/**
 * An embeddings answer, `{data:[{embedding, index}], model, usage:{prompt_tokens, total_tokens}}`,
 * as a completion: one vector per input, ordered by `index` (position when absent), with
 * completion_tokens 0. Anything else (a count that does not match the inputs, a base64 or
 * empty vector, repeated indices) is unusable.
 */
export function parseEmbeddings(text: string, requestedModel: string, shape: { single: boolean; count: number }): Completion | { malformed: string } {
  if (text.trim() === '') return { malformed: 'answer body is empty' };
  const json = parseJson(text);
  if (json === undefined) return { malformed: `answer is not valid JSON: ${truncate(text, 60)}` };
  if (!isRecord(json)) return { malformed: 'answer is not a JSON object' };
  const data = json['data'];
  if (!Array.isArray(data)) return { malformed: 'answer has no data list' };
  if (data.length !== shape.count) return { malformed: `answer has ${data.length} embeddings for ${shape.count} inputs` };
  const vectors: Array<number[] | undefined> = new Array<number[] | undefined>(shape.count).fill(undefined);
  for (const [position, item] of data.entries()) {
    if (!isRecord(item)) return { malformed: `data.${position} is not an object` };
    const index = item['index'] ?? position;
    if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= shape.count || vectors[index]) {
      return { malformed: `data.${position} has a bad or repeated index` };
    }
    const embedding = item['embedding'];
    if (!Array.isArray(embedding) || embedding.length === 0 || !embedding.every((v) => typeof v === 'number' && Number.isFinite(v))) {
      return { malformed: `data.${position}.embedding is not a non-empty list of numbers` };
    }
    vectors[index] = embedding as number[];
  }
  const ordered = vectors as number[][]; // every index 0..count-1 filled: count items, no repeats
  const completion: Completion = {
    model: typeof json['model'] === 'string' && json['model'] !== '' ? json['model'] : requestedModel,
    content: null,
    finish_reason: null,
  };
  if (shape.single) completion.embedding = ordered[0] as number[];
  else completion.embeddings = ordered;
  const usage = json['usage'];
  if (isRecord(usage) && typeof usage['prompt_tokens'] === 'number') {
    const prompt = usage['prompt_tokens'];
    const total = typeof usage['total_tokens'] === 'number' ? usage['total_tokens'] : prompt;
    completion.usage = { prompt_tokens: prompt, completion_tokens: 0, total_tokens: total };
  }
  return completion;
}

export interface ErrorInfo {
  message: string;
  /** OpenAI's `error.code` and `error.type`, when given (e.g. `insufficient_quota`). */
  codes: string[];
  /** The body was the API's own JSON error (`{"error": …}`), not a proxy's or web server's page. */
  fromApi: boolean;
}

/** The upstream's own error message (OpenAI `{error:{message,code,type}}` or plain text). */
export function readError(text: string): ErrorInfo {
  const json = parseJson(text);
  if (isRecord(json)) {
    const error = json['error'];
    if (isRecord(error)) {
      const message = typeof error['message'] === 'string' ? error['message'] : JSON.stringify(error);
      const codes = [error['code'], error['type']].filter((c): c is string => typeof c === 'string');
      return { message: truncate(message), codes, fromApi: true };
    }
    if (typeof error === 'string') return { message: truncate(error), codes: [], fromApi: true };
    if (typeof json['message'] === 'string') return { message: truncate(json['message']), codes: [], fromApi: true };
  }
  return { message: truncate(text) || '(empty body)', codes: [], fromApi: false };
}

/** The call's result from a completion and how it was obtained. */
export function resultOf(completion: Completion, attempts: number, upstreamMs: number, provider: string): UpstreamResult {
  // Field by field rather than a spread (V8's slow path for objects of varying shape).
  const result: UpstreamResult = {
    model: completion.model,
    content: completion.content,
    finish_reason: completion.finish_reason,
    attempts,
    upstreamMs,
    provider,
  };
  if (completion.tool_calls !== undefined) result.tool_calls = completion.tool_calls;
  if (completion.logprobs !== undefined) result.logprobs = completion.logprobs;
  if (completion.choices !== undefined) result.choices = completion.choices;
  if (completion.embedding !== undefined) result.embedding = completion.embedding;
  if (completion.embeddings !== undefined) result.embeddings = completion.embeddings;
  if (completion.usage !== undefined) result.usage = completion.usage;
  return result;
}
