// Ok replies, built in one place whether the answer came from the upstream, the cache or an
// identical request in flight: each carries the request's own id and priority.
import { type Answer, BridgeError, type ErrorReply, type OkReply, type Priority } from '../../contract/index.js';
import type { CachedAnswer } from '../store/port.js';
import type { Job } from '../model/job.js';

/** The answer's part of an ok reply (model, content or vectors, usage), without undefined keys. */
export function answerFields(answer: CachedAnswer): Answer {
  const fields: Answer = { model: answer.model, content: answer.content, finish_reason: answer.finish_reason };
  if (answer.tool_calls) fields.tool_calls = answer.tool_calls;
  if (answer.logprobs !== undefined) fields.logprobs = answer.logprobs;
  if (answer.choices) fields.choices = answer.choices;
  if (answer.embedding) fields.embedding = answer.embedding;
  if (answer.embeddings) fields.embeddings = answer.embeddings;
  if (answer.usage) fields.usage = answer.usage;
  if (answer.data) fields.data = answer.data;
  return fields;
}

export interface ReplyFacts {
  /** From the cache or an identical request, rather than an upstream call of its own. */
  cached: boolean;
  attempts: number;
  /** When it was claimed (arrival for a cache hit at admission). */
  claimedAt: number;
  upstreamMs: number;
  now: number;
}

export function okReply(job: Job, answer: CachedAnswer, facts: ReplyFacts): OkReply {
  // Field by field, in the order devices have always seen, rather than spreading answerFields
  // (a copy, and V8's slow path for objects of varying shape).
  const reply = { id: job.id, ok: true, model: answer.model, content: answer.content, finish_reason: answer.finish_reason } as OkReply;
  if (answer.tool_calls) reply.tool_calls = answer.tool_calls;
  if (answer.logprobs !== undefined) reply.logprobs = answer.logprobs;
  if (answer.choices) reply.choices = answer.choices;
  if (answer.embedding) reply.embedding = answer.embedding;
  if (answer.embeddings) reply.embeddings = answer.embeddings;
  if (answer.usage) reply.usage = answer.usage;
  if (answer.data) reply.data = answer.data;
  reply.cached = facts.cached;
  reply.attempts = facts.attempts;
  reply.priority = job.priority;
  reply.timing = {
    queued_ms: Math.max(0, facts.claimedAt - job.arrivalMs),
    upstream_ms: Math.round(facts.upstreamMs),
    total_ms: Math.max(0, facts.now - job.arrivalMs),
  };
  return reply;
}

/** The error reply of a request: its contract code and message, and retry_after_ms when known. */
export function errorReply(id: string | null, err: BridgeError, priority?: Priority): ErrorReply {
  const error: ErrorReply['error'] = { code: err.code, message: err.message };
  if (err.retryAfterMs !== undefined) error.retry_after_ms = Math.max(0, Math.ceil(err.retryAfterMs));
  return priority === undefined ? { id, ok: false, error } : { id, ok: false, priority, error };
}

/**
 * The error reply of an answer that broke its output schema after every retry: the first
 * violation, and the start of the answer (already bounded) for the operator (it is kept with
 * the dead letter).
 */
export function invalidOutputReply(job: Job, violation: string, raw: string): ErrorReply {
  const reply = errorReply(job.id, new BridgeError('invalid_output', `the answer breaks its output schema: ${violation}`), job.priority);
  reply.error.raw = raw;
  return reply;
}
