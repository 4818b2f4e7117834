// The outside contract (shared/CONTRACT.md v1) as code: topics, payload schemas and
// error codes. Shared by the bridge, the simulators and the tests, so they cannot drift.
import { z } from 'zod';

export const CONTRACT_VERSION = 1;

export const PRIORITIES = ['critical', 'high', 'normal', 'low'] as const;
export const PrioritySchema = z.enum(PRIORITIES);
export type Priority = z.infer<typeof PrioritySchema>;

export const ERROR_CODES = [
  'invalid_request',
  'payload_too_large',
  'rate_limited',
  'queue_full',
  'expired',
  'upstream_error',
  'upstream_timeout',
  'unavailable',
  'internal',
] as const;
export const ErrorCodeSchema = z.enum(ERROR_CODES);
export type ErrorCode = z.infer<typeof ErrorCodeSchema>;

export const DEVICE_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,64}$/;

/** A client's device id is its client id up to the first `.`. */
export function deviceIdOfClientId(clientId: string): string | null {
  const dot = clientId.indexOf('.');
  const id = dot === -1 ? clientId : clientId.slice(0, dot);
  return DEVICE_ID_PATTERN.test(id) ? id : null;
}

export const topics = {
  infer: (deviceId: string, priority: Priority): string => `devices/${deviceId}/infer/${priority}`,
  result: (deviceId: string): string => `devices/${deviceId}/result`,
  status: (instanceId: string): string => `bridge/${instanceId}/status`,
  metrics: (instanceId: string): string => `bridge/${instanceId}/metrics`,
  inferWildcard: 'devices/+/infer/+',
};

export type InferTopic =
  | { kind: 'infer'; deviceId: string; priority: Priority }
  | { kind: 'bad_priority'; deviceId: string; segment: string };

/** Parses `devices/{deviceId}/infer/{priority}`; null when the topic is not a request topic. */
export function parseInferTopic(topic: string): InferTopic | null {
  const parts = topic.split('/');
  if (parts.length !== 4 || parts[0] !== 'devices' || parts[2] !== 'infer') return null;
  const deviceId = parts[1] ?? '';
  if (!DEVICE_ID_PATTERN.test(deviceId)) return null;
  const segment = parts[3] ?? '';
  const priority = PrioritySchema.safeParse(segment);
  return priority.success
    ? { kind: 'infer', deviceId, priority: priority.data }
    : { kind: 'bad_priority', deviceId, segment };
}

// --- request -------------------------------------------------------------------------

const ContentPartSchema = z.looseObject({ type: z.string().min(1) });
export const ChatMessageSchema = z.looseObject({
  role: z.string().min(1),
  content: z.union([z.string(), z.array(ContentPartSchema), z.null()]),
});
export type ChatMessage = z.infer<typeof ChatMessageSchema>;

export const InferRequestSchema = z.object({
  id: z.string().regex(REQUEST_ID_PATTERN, 'must be 1 to 64 characters of A-Za-z0-9._:-'),
  messages: z.array(ChatMessageSchema).min(1),
  model: z.string().min(1).max(256).optional(),
  max_tokens: z.number().int().positive().optional(),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().min(0).max(1).optional(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).optional(),
  response_format: z.looseObject({ type: z.string() }).optional(),
  seed: z.number().int().optional(),
  lock: z.string().min(1).max(128).optional(),
  ttl_ms: z.number().int().positive().optional(),
  cache: z.boolean().optional(),
});
export type InferRequest = z.infer<typeof InferRequestSchema>;

/** Fields passed through to the upstream unchanged. */
export const PASSTHROUGH_FIELDS = [
  'max_tokens',
  'temperature',
  'top_p',
  'stop',
  'response_format',
  'seed',
] as const;

// --- reply ---------------------------------------------------------------------------

export const UsageSchema = z.object({
  prompt_tokens: z.number(),
  completion_tokens: z.number(),
  total_tokens: z.number(),
});
export type Usage = z.infer<typeof UsageSchema>;

export const OkReplySchema = z.object({
  id: z.string(),
  ok: z.literal(true),
  model: z.string(),
  content: z.string().nullable(),
  finish_reason: z.string().nullable(),
  usage: UsageSchema.optional(),
  cached: z.boolean(),
  attempts: z.number().int(),
  priority: PrioritySchema,
  timing: z.object({ queued_ms: z.number(), upstream_ms: z.number(), total_ms: z.number() }),
});
export type OkReply = z.infer<typeof OkReplySchema>;

export const ErrorReplySchema = z.object({
  id: z.string().nullable(),
  ok: z.literal(false),
  priority: PrioritySchema.optional(),
  error: z.object({
    code: ErrorCodeSchema,
    message: z.string(),
    retry_after_ms: z.number().optional(),
  }),
});
export type ErrorReply = z.infer<typeof ErrorReplySchema>;

export const ReplySchema = z.discriminatedUnion('ok', [OkReplySchema, ErrorReplySchema]);
export type Reply = z.infer<typeof ReplySchema>;

export const StatusSchema = z.object({
  state: z.enum(['online', 'offline']),
  instance: z.string(),
  version: z.string(),
  since: z.string(),
});
export type Status = z.infer<typeof StatusSchema>;
