// POST /v1/chat/completions for the upstream simulator: the request check and a
// deterministic answer that quotes the last user message.
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
  const lastUser = [...messages].reverse().find((m) => isRecord(m) && m.role === 'user');
  const question = isRecord(lastUser) ? contentText(lastUser.content) : '';
  const quoted = `sim answer to: ${question.slice(0, 80)}`;
  const content = quoted.length >= answerBytes ? quoted : quoted + ' ' + '.'.repeat(answerBytes - quoted.length - 1);
  const promptText = messages.map((m) => (isRecord(m) ? contentText(m.content) : '')).join('\n');
  const promptTokens = estimateTokens(promptText);
  const completionTokens = estimateTokens(content);
  return {
    id: `chatcmpl-sim-${seq}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop', logprobs: null }],
    usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
  };
}
