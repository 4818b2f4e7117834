// POST /v1/chat/completions for the upstream simulator: the request check and a
// deterministic answer that quotes the last user message.
import { offSchema, offSchemaSample, requestedSchema, sampleOf } from './json-answer.js';
import { DEFAULT_MODEL, estimateTokens, isRecord } from './openai.js';

/** Text of a message's content: a string, or the text parts of an OpenAI content array. */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part) => (isRecord(part) && part.type === 'text' && typeof part.text === 'string' ? part.text : ''))
    .filter((t) => t !== '')
    .join(' ');
}

/** A 400 message when a chat body (already a JSON object) cannot be answered, else null. */
export function checkChat(body: Record<string, unknown>): string | null {
  if (!Array.isArray(body.messages) || body.messages.length === 0) return "'messages' must be a non-empty array";
  return null;
}

/** The chat.completion for a checked body; `seq` numbers the completion id; content padded to `answerBytes`. */
export function chatAnswer(body: Record<string, unknown>, seq: number, answerBytes = 0): unknown {
  const model = typeof body.model === 'string' && body.model !== '' ? body.model : DEFAULT_MODEL;
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const last: unknown = messages[messages.length - 1];
  const lastUser = [...messages].reverse().find((m) => isRecord(m) && m.role === 'user');
  const question = isRecord(lastUser) ? contentText(lastUser.content) : '';
  const n = typeof body.n === 'number' && body.n > 1 ? body.n : 1;
  const texts = messages.map((m) => (isRecord(m) ? contentText(m.content) : ''));
  const schema = requestedSchema(body, messages);
  const text = `sim answer to: ${question.slice(0, 80)}`;
  const typed = schema && (offSchema(messages, texts) ? offSchemaSample(schema, text) : sampleOf(schema, text));
  const choices = Array.from({ length: n }, (_, index) =>
    typed === undefined ? chatChoice(body, last, question, index, answerBytes) : typedChoice(typed, index, answerBytes),
  );
  const promptText = texts.join('\n');
  const promptTokens = estimateTokens(promptText);
  const completionTokens = choices.reduce((sum, c) => sum + estimateTokens(c.message.content ?? JSON.stringify(c.message.tool_calls)), 0);
  return {
    id: `chatcmpl-sim-${seq}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices,
    usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
  };
}

interface SimChoice {
  index: number;
  message: { role: 'assistant'; content: string | null; tool_calls?: unknown[] };
  finish_reason: string;
  logprobs: unknown;
}

/** A choice in JSON mode with a schema: the object (padded with JSON whitespace to `answerBytes`). */
function typedChoice(value: unknown, index: number, answerBytes: number): SimChoice {
  const json = JSON.stringify(value);
  return { index, message: { role: 'assistant', content: json.padEnd(answerBytes, ' ') }, finish_reason: 'stop', logprobs: null };
}

/**
 * One deterministic choice: a call of the first tool when tools are offered and the last
 * message is the user's (tool_choice "none" declines); a JSON object in JSON mode; else text
 * quoting the question (or the tool's result, after a tool message). Choice i > 0 says so.
 */
function chatChoice(body: Record<string, unknown>, last: unknown, question: string, index: number, answerBytes: number): SimChoice {
  const tools = Array.isArray(body.tools) ? body.tools : [];
  const firstTool: unknown = tools[0];
  const name = isRecord(firstTool) && isRecord(firstTool.function) ? firstTool.function.name : undefined;
  const logprobs = body.logprobs === true ? { content: [{ token: 'sim', logprob: -0.1, top_logprobs: [] }] } : null;
  if (typeof name === 'string' && body.tool_choice !== 'none' && isRecord(last) && last.role === 'user') {
    const call = { id: `call_sim_${index}`, type: 'function', function: { name, arguments: JSON.stringify({ question: question.slice(0, 80) }) } };
    return { index, message: { role: 'assistant', content: null, tool_calls: [call] }, finish_reason: 'tool_calls', logprobs };
  }
  const about = isRecord(last) && last.role === 'tool' ? `tool result: ${contentText(last.content).slice(0, 80)}` : question.slice(0, 80);
  const prefix = index === 0 ? 'sim answer' : `sim answer ${index + 1}`;
  const format = isRecord(body.response_format) ? body.response_format.type : undefined;
  const quoted = format === 'json_object' || format === 'json_schema' ? JSON.stringify({ answer: `${prefix} to: ${about}` }) : `${prefix} to: ${about}`;
  const content = quoted.length >= answerBytes ? quoted : quoted + ' ' + '.'.repeat(answerBytes - quoted.length - 1);
  return { index, message: { role: 'assistant', content }, finish_reason: 'stop', logprobs };
}
