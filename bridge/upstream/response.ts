// Reading an OpenAI-compatible answer. Kept apart from the HTTP loop so the loop only
// decides *whether* to retry, never how to pick a body apart.
import { UsageSchema, type Usage } from '../contract.js';

export interface Completion {
  model: string;
  content: string | null;
  finish_reason: string | null;
  usage?: Usage;
}

const MAX_MESSAGE_CHARS = 200;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function parseJson(text: string): unknown {
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
  const choices = json['choices'];
  const first: unknown = Array.isArray(choices) ? choices[0] : undefined;
  if (!isRecord(first)) return { malformed: 'answer has no choices' };
  const message = first['message'];
  if (!isRecord(message)) return { malformed: 'first choice has no message' };
  const content = message['content'];
  const finish = first['finish_reason'];
  const usage = UsageSchema.safeParse(json['usage']);
  const completion: Completion = {
    model: typeof json['model'] === 'string' && json['model'] !== '' ? json['model'] : requestedModel,
    content: typeof content === 'string' ? content : null,
    finish_reason: typeof finish === 'string' ? finish : null,
  };
  if (usage.success) completion.usage = usage.data;
  return completion;
}

export interface ErrorInfo {
  message: string;
  /** OpenAI's `error.code` and `error.type`, when given (e.g. `insufficient_quota`). */
  codes: string[];
}

/** The upstream's own error message (OpenAI `{error:{message,code,type}}` or plain text). */
export function readError(text: string): ErrorInfo {
  const json = parseJson(text);
  if (isRecord(json)) {
    const error = json['error'];
    if (isRecord(error)) {
      const message = typeof error['message'] === 'string' ? error['message'] : JSON.stringify(error);
      const codes = [error['code'], error['type']].filter((c): c is string => typeof c === 'string');
      return { message: truncate(message), codes };
    }
    if (typeof error === 'string') return { message: truncate(error), codes: [] };
    if (typeof json['message'] === 'string') return { message: truncate(json['message']), codes: [] };
  }
  return { message: truncate(text) || '(empty body)', codes: [] };
}
