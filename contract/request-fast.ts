// The common device request read without zod: the schemas in payloads.ts stay the definition,
// and this only answers for the plainest requests (chat, string or null contents, no unusual
// fields), exactly as InferRequestSchema would; anything else is left to it. Parsing every
// request with zod cost as much CPU as the rest of intake (test/unit/request-fast.test.ts
// checks both agree, on accepted requests and on refused ones).
import { CHAT_ROLES, type ChatRequest } from './payloads.js';
import { REQUEST_ID_PATTERN } from './topics.js';

/** ChatRequestSchema's keys this path reads, in the schema's order (the order zod writes them in). */
const FIELDS = ['id', 'model', 'lock', 'ttl_ms', 'cache', 'messages', 'max_tokens', 'temperature', 'top_p', 'seed'] as const;
type Field = (typeof FIELDS)[number];

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const isText = (value: unknown, min: number, max: number): boolean => typeof value === 'string' && value.length >= min && value.length <= max;
const isCount = (value: unknown): boolean => Number.isSafeInteger(value) && (value as number) > 0;
const isBetween = (value: unknown, min: number, max: number): boolean => typeof value === 'number' && value >= min && value <= max;

/** Whether one field's value passes its schema (false for a field this path leaves to zod). */
function valid(field: string, value: unknown): boolean {
  switch (field as Field) {
    case 'id':
      return typeof value === 'string' && REQUEST_ID_PATTERN.test(value);
    case 'model':
      return isText(value, 1, 256);
    case 'lock':
      return isText(value, 1, 128);
    case 'ttl_ms':
    case 'max_tokens':
      return isCount(value);
    case 'cache':
      return typeof value === 'boolean';
    case 'messages':
      return Array.isArray(value) && value.length > 0;
    case 'temperature':
      return isBetween(value, 0, 2);
    case 'top_p':
      return isBetween(value, 0, 1);
    case 'seed':
      return Number.isSafeInteger(value);
    default:
      return false;
  }
}

// A tool message needs a tool_call_id, which a plain message has not: zod refuses it.
type PlainRole = Exclude<(typeof CHAT_ROLES)[number], 'tool'>;
const ROLES: ReadonlySet<unknown> = new Set(CHAT_ROLES.filter((r) => r !== 'tool'));
const isRole = (value: unknown): value is PlainRole => ROLES.has(value);

/** A message of a role and a string (or null) content, as ChatMessageSchema writes it; undefined otherwise. */
function plainMessage(value: unknown): { role: string; content: string | null } | undefined {
  if (!isRecord(value)) return undefined;
  let keys = 0;
  for (const key in value) {
    if (key !== 'role' && key !== 'content') return undefined;
    keys += 1;
  }
  const { role, content } = value;
  if (keys !== 2 || !isRole(role) || (typeof content !== 'string' && content !== null)) return undefined;
  return { role, content };
}

/**
 * The request as InferRequestSchema.safeParse(value).data would be, when `value` is a plain
 * chat request this path knows every field of; undefined when zod must decide (it may be
 * valid all the same).
 */
export function plainChatRequest(value: unknown): ChatRequest | undefined {
  if (!isRecord(value) || !('id' in value) || !('messages' in value)) return undefined;
  for (const key in value) if (!valid(key, value[key])) return undefined;
  const messages = (value['messages'] as unknown[]).map(plainMessage);
  if (messages.includes(undefined)) return undefined;
  const request: Record<string, unknown> = {};
  for (const field of FIELDS) {
    if (field === 'messages') request[field] = messages;
    else if (field in value) request[field] = value[field];
  }
  return request as ChatRequest;
}
