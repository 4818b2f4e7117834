// Payloads of the contract: requests, replies and the status document, as zod schemas.
import { z } from 'zod';
import { ErrorCodeSchema } from './errors.js';
import { PrioritySchema, REQUEST_ID_PATTERN, TEMPLATE_NAME_PATTERN } from './topics.js';

// --- request -------------------------------------------------------------------------

const ContentPartSchema = z.looseObject({ type: z.string().min(1) });
/** OpenAI's chat roles (`function` is its deprecated form of `tool`): any other is refused here, not by the upstream. */
export const CHAT_ROLES = ['system', 'developer', 'user', 'assistant', 'tool', 'function'] as const;
export const ChatMessageSchema = z
  .looseObject({
    role: z.enum(CHAT_ROLES, { error: `must be one of ${CHAT_ROLES.join(', ')}` }),
    content: z.union([z.string(), z.array(ContentPartSchema), z.null()]),
  })
  // Without it the upstream refuses the request (a 400) after it was queued and paid a slot.
  .refine((m) => m.role !== 'tool' || typeof m['tool_call_id'] === 'string', { message: 'a tool message needs tool_call_id', path: ['tool_call_id'] });
export type ChatMessage = z.infer<typeof ChatMessageSchema>;

/** Fields every request may carry, chat or embeddings. */
const REQUEST_COMMON = {
  id: z.string().regex(REQUEST_ID_PATTERN, 'must be 1 to 64 characters of A-Za-z0-9._:-'),
  model: z.string().min(1).max(256).optional(),
  lock: z.string().min(1).max(128).optional(),
  ttl_ms: z.number().int().positive().optional(),
  cache: z.boolean().optional(),
};

/** Chat parameters passed through to the upstream unchanged (and part of the cache key). */
export const PASSTHROUGH_FIELDS = [
  'max_tokens',
  'max_completion_tokens',
  'temperature',
  'top_p',
  'stop',
  'response_format',
  'seed',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'frequency_penalty',
  'presence_penalty',
  'logit_bias',
  'logprobs',
  'top_logprobs',
  'user',
  'n',
] as const;

/** OpenAI's own cap on tools per request. */
export const MAX_TOOLS = 128;
/** The tools' definitions as JSON, at most: one request cannot carry megabytes of schema. */
export const MAX_TOOLS_JSON_CHARS = 65_536;
/** A response_format as JSON, at most: a json_schema is a schema, not a document. */
export const MAX_RESPONSE_FORMAT_JSON_CHARS = 65_536;
/** Choices one request may ask for (`n`): each is paid for. */
export const MAX_CHOICES = 8;

/** A field no schema knows is refused by name, never dropped (a typo would cost money unseen). */
const unknownField = {
  error: (issue: { code?: string; keys?: string[] }) =>
    issue.code === 'unrecognized_keys' ? `unknown field ${(issue.keys ?? []).map((k) => `"${k}"`).join(', ')}` : undefined,
};

const ToolSchema = z.looseObject({
  type: z.literal('function', { error: 'type must be "function"' }),
  function: z.looseObject({
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 characters of A-Za-z0-9_-'),
    description: z.string().max(4096).optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().optional(),
  }),
});

/** OpenAI's structured outputs: `json_schema` names a schema, and is required with that type. */
const ResponseFormatSchema = z
  .looseObject({
    type: z.enum(['text', 'json_object', 'json_schema']),
    json_schema: z
      .looseObject({
        name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 characters of A-Za-z0-9_-'),
        description: z.string().optional(),
        schema: z.record(z.string(), z.unknown()).optional(),
        strict: z.boolean().nullable().optional(),
      })
      .optional(),
  })
  .refine((f) => f.type !== 'json_schema' || f.json_schema !== undefined, {
    message: 'type json_schema needs json_schema: {"name", "schema"}',
    path: ['json_schema'],
  })
  .refine((f) => JSON.stringify(f).length <= MAX_RESPONSE_FORMAT_JSON_CHARS, `must be at most ${MAX_RESPONSE_FORMAT_JSON_CHARS} characters of JSON`);

const ToolChoiceSchema = z.union([
  z.enum(['none', 'auto', 'required']),
  z.looseObject({ type: z.literal('function'), function: z.looseObject({ name: z.string().min(1) }) }),
]);

/** Embeddings parameters passed through to the upstream unchanged. */
export const EMBEDDING_PASSTHROUGH_FIELDS = ['dimensions', 'encoding_format'] as const;

/** The most inputs one embeddings request may carry (OpenAI's own limit). */
export const MAX_EMBEDDING_INPUTS = 2048;

/** A field of the other kind of request: present at all, it is a schema violation naming itself. */
const notFor = (field: string, kind: 'chat' | 'embeddings') =>
  z
    .never({
      error:
        kind === 'chat'
          ? `${field} applies to embeddings requests (input), not to chat requests (messages)`
          : `${field} applies to chat requests (messages), not to embeddings requests (input)`,
    })
    .optional();

/** A chat request (`messages`): POST {baseUrl}/chat/completions. */
export const ChatRequestSchema = z.strictObject(
  {
    ...REQUEST_COMMON,
    messages: z.array(ChatMessageSchema).min(1),
    max_tokens: z.number().int().positive().optional(),
    max_completion_tokens: z.number().int().positive().optional(),
    temperature: z.number().min(0).max(2).optional(),
    top_p: z.number().min(0).max(1).optional(),
    stop: z.union([z.string(), z.array(z.string()).max(4)]).optional(),
    response_format: ResponseFormatSchema.optional(),
    seed: z.number().int().optional(),
    tools: z
      .array(ToolSchema)
      .min(1)
      .max(MAX_TOOLS, `must hold at most ${MAX_TOOLS} tools`)
      .refine((tools) => JSON.stringify(tools).length <= MAX_TOOLS_JSON_CHARS, `must be at most ${MAX_TOOLS_JSON_CHARS} characters of JSON`)
      .optional(),
    tool_choice: ToolChoiceSchema.optional(),
    parallel_tool_calls: z.boolean().optional(),
    frequency_penalty: z.number().min(-2).max(2).optional(),
    presence_penalty: z.number().min(-2).max(2).optional(),
    logit_bias: z.record(z.string().regex(/^\d+$/, 'keys must be token ids'), z.number().min(-100).max(100)).optional(),
    logprobs: z.boolean().optional(),
    top_logprobs: z.number().int().min(0).max(20).optional(),
    user: z.string().max(256).optional(),
    n: z.number().int().min(1).max(MAX_CHOICES, `must be at most ${MAX_CHOICES}`).optional(),
    /** Preview the first choice's text on `devices/{id}/stream` as it is written; the reply is unchanged. */
    stream: z.boolean().optional(),
    dimensions: notFor('dimensions', 'chat'),
    encoding_format: notFor('encoding_format', 'chat'),
  },
  unknownField,
);
export type ChatRequest = z.infer<typeof ChatRequestSchema>;

/** An embeddings request (`input`): POST {baseUrl}/embeddings. */
export const EmbeddingRequestSchema = z.strictObject(
  {
    ...REQUEST_COMMON,
    input: z.union(
      [
        z.string().min(1, 'must not be empty'),
        z
          .array(z.string().min(1, 'must not be empty'))
          .min(1, 'must hold at least one string')
          .max(MAX_EMBEDDING_INPUTS, `must hold at most ${MAX_EMBEDDING_INPUTS} strings`),
      ],
      { error: `must be a non-empty string or an array of 1 to ${MAX_EMBEDDING_INPUTS} non-empty strings` },
    ),
    dimensions: z.number().int().positive().optional(),
    // The reply carries the vectors as JSON numbers, so base64 is refused rather than decoded.
    encoding_format: z.literal('float', { error: 'only "float" is supported: the reply carries the vectors as numbers' }).optional(),
    max_tokens: notFor('max_tokens', 'embeddings'),
    temperature: notFor('temperature', 'embeddings'),
    top_p: notFor('top_p', 'embeddings'),
    stop: notFor('stop', 'embeddings'),
    response_format: notFor('response_format', 'embeddings'),
    seed: notFor('seed', 'embeddings'),
    stream: notFor('stream', 'embeddings'),
  },
  unknownField,
);
export type EmbeddingRequest = z.infer<typeof EmbeddingRequestSchema>;

/** Var names: what `{{name}}` may hold. */
export const VAR_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
/** Vars one template request may carry, and the characters of one string var. */
export const MAX_VARS = 32;
export const MAX_VAR_CHARS = 4096;

/**
 * A template request: CONFIG_FILE `templates` holds the prompt, the device only names it and
 * fills its `{{vars}}` (strings or numbers, inserted as text). Rendered on the bridge into a
 * chat request before admission.
 */
export const TemplateRequestSchema = z.strictObject(
  {
    ...REQUEST_COMMON,
    template: z.string().regex(TEMPLATE_NAME_PATTERN, 'must be 1 to 64 characters of A-Za-z0-9_.-'),
    vars: z
      .record(
        z.string().regex(VAR_NAME_PATTERN, 'var names are 1 to 64 characters of A-Za-z0-9_, not starting with a digit'),
        z.union([z.string().max(MAX_VAR_CHARS, `must be at most ${MAX_VAR_CHARS} characters`), z.number().refine(Number.isFinite, 'must be finite')], {
          error: 'must be a string or a number',
        }),
      )
      .refine((vars) => Object.keys(vars).length <= MAX_VARS, `must hold at most ${MAX_VARS} vars`)
      .default({}),
    stream: z.boolean().optional(),
  },
  unknownField,
);
export type TemplateRequest = z.infer<typeof TemplateRequestSchema>;

export type RequestKind = 'chat' | 'embeddings';

/**
 * A device request: exactly one of `messages` (chat) or `input` (embeddings). The kind is
 * picked first, so a violation is reported against the one schema that applies (a plain
 * union would only say "Invalid input").
 */
export const InferRequestSchema = z.unknown().transform((value, ctx): ChatRequest | EmbeddingRequest | TemplateRequest => {
  const has = (field: string): boolean => typeof value === 'object' && value !== null && (value as Record<string, unknown>)[field] !== undefined;
  const given = ['messages', 'input', 'template'].filter(has);
  if (given.length > 1) {
    ctx.addIssue({ code: 'custom', message: `give one of messages (chat), input (embeddings) or template, not ${given.join(' and ')}`, path: [] });
    return z.NEVER;
  }
  if (typeof value === 'object' && value !== null && !Array.isArray(value) && given.length === 0) {
    // Reported at `messages`, as before embeddings existed.
    ctx.addIssue({ code: 'custom', message: 'missing: give messages (chat), input (embeddings) or template', path: ['messages'] });
    return z.NEVER;
  }
  const schema = has('input') ? EmbeddingRequestSchema : has('template') ? TemplateRequestSchema : ChatRequestSchema;
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path });
  return z.NEVER;
});
/** What a device may publish on its request topic. */
export type DeviceRequest = z.infer<typeof InferRequestSchema>;
/** What a job carries: a chat or embeddings request (a template request is rendered into chat first). */
export type InferRequest = ChatRequest | EmbeddingRequest;

export function isTemplateRequest(request: DeviceRequest): request is TemplateRequest {
  return 'template' in request;
}

export function isEmbeddingRequest(request: InferRequest): request is EmbeddingRequest {
  return 'input' in request;
}

export function requestKind(request: InferRequest): RequestKind {
  return isEmbeddingRequest(request) ? 'embeddings' : 'chat';
}

// --- reply ---------------------------------------------------------------------------

export const UsageSchema = z.object({
  prompt_tokens: z.number(),
  completion_tokens: z.number(),
  total_tokens: z.number(),
});
export type Usage = z.infer<typeof UsageSchema>;

/** A tool call as OpenAI returns it: the device runs it and sends the result back as a `tool` message. */
export const ToolCallSchema = z.looseObject({
  id: z.string(),
  type: z.literal('function'),
  function: z.looseObject({ name: z.string(), arguments: z.string() }),
});
export type ToolCall = z.infer<typeof ToolCallSchema>;

/** One of the answers when a request asked for `n` > 1. */
export const ChoiceSchema = z.object({
  index: z.number().int(),
  content: z.string().nullable(),
  finish_reason: z.string().nullable(),
  tool_calls: z.array(ToolCallSchema).optional(),
  logprobs: z.unknown().optional(),
});
export type Choice = z.infer<typeof ChoiceSchema>;

export const OkReplySchema = z.object({
  id: z.string(),
  ok: z.literal(true),
  model: z.string(),
  /** Chat: the answer's text. Embeddings: always null. */
  content: z.string().nullable(),
  /** Chat: why the answer ended (`tool_calls` when the model calls tools). Embeddings: always null. */
  finish_reason: z.string().nullable(),
  /** Chat: the tools the model calls (then content may be null). */
  tool_calls: z.array(ToolCallSchema).optional(),
  /** Chat with `logprobs: true`: the first choice's log probabilities, as the upstream gave them. */
  logprobs: z.unknown().optional(),
  /** Chat with `n` > 1: every choice, in order (the first is also the fields above). */
  choices: z.array(ChoiceSchema).optional(),
  /** Embeddings of a string `input`: its vector. */
  embedding: z.array(z.number()).optional(),
  /** Embeddings of an array `input`: one vector per string, in input order. */
  embeddings: z.array(z.array(z.number())).optional(),
  /** Embeddings: completion_tokens is 0. */
  usage: UsageSchema.optional(),
  /** A template with `output` (or a `json_schema` response format): the answer as the validated, typed object. */
  data: z.record(z.string(), z.unknown()).optional(),
  cached: z.boolean(),
  attempts: z.number().int(),
  priority: PrioritySchema,
  timing: z.object({ queued_ms: z.number(), upstream_ms: z.number(), total_ms: z.number() }),
});
export type OkReply = z.infer<typeof OkReplySchema>;

/** The answer's part of an ok reply: what the upstream said, and what the cache keeps of it. */
export type Answer = Pick<
  OkReply,
  'model' | 'content' | 'finish_reason' | 'tool_calls' | 'logprobs' | 'choices' | 'embedding' | 'embeddings' | 'usage' | 'data'
>;

export const ErrorReplySchema = z.object({
  id: z.string().nullable(),
  ok: z.literal(false),
  priority: PrioritySchema.optional(),
  error: z.object({
    code: ErrorCodeSchema,
    message: z.string(),
    retry_after_ms: z.number().optional(),
    /** `invalid_output`: the start of the model's last answer (at most 4096 characters), kept for the operator in the dead letter; never sent to the device. */
    raw: z.string().optional(),
  }),
});
export type ErrorReply = z.infer<typeof ErrorReplySchema>;

export const ReplySchema = z.discriminatedUnion('ok', [OkReplySchema, ErrorReplySchema]);
export type Reply = z.infer<typeof ReplySchema>;

// --- stream (a preview of the text; the reply above stays the end of the request) ----------

/** Text of the first choice, in order: a device shows the deltas one after another. */
export const StreamDeltaSchema = z.object({ id: z.string(), seq: z.number().int().nonnegative(), delta: z.string() });
/** The text shown so far is void (the provider failed mid-answer): clear it, the next delta starts afresh. */
export const StreamResetSchema = z.object({ id: z.string(), seq: z.number().int().nonnegative(), reset: z.literal(true) });
export const StreamChunkSchema = z.union([StreamDeltaSchema, StreamResetSchema]);
export type StreamChunk = z.infer<typeof StreamChunkSchema>;

export const StatusSchema = z.object({
  state: z.enum(['online', 'offline']),
  instance: z.string(),
  version: z.string(),
  since: z.string(),
});
export type Status = z.infer<typeof StatusSchema>;
