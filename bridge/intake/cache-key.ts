// The response cache's key: SHA-256 of the canonical request — its kind (chat or
// embeddings), model, messages or input and the passthrough parameters, with object keys
// sorted — never the id, lock or ttl.
import * as crypto from 'node:crypto';
import { EMBEDDING_PASSTHROUGH_FIELDS, PASSTHROUGH_FIELDS, isEmbeddingRequest, type InferRequest } from '../../contract/index.js';

/** The keys of a common request, quoted once rather than for every request. */
const QUOTED = new Map(
  ['kind', 'model', 'messages', 'input', 'route', 'role', 'content', 'type', 'text', ...PASSTHROUGH_FIELDS, ...EMBEDDING_PASSTHROUGH_FIELDS].map(
    (key) => [key, JSON.stringify(key)],
  ),
);

/**
 * JSON with object keys sorted at every depth, so equal requests give equal text. Built by
 * hand rather than with entries/filter/map, and known keys come quoted: it runs for every request.
 */
function canonical(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i += 1) out += (i === 0 ? '' : ',') + canonical(value[i]);
    return `${out}]`;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  if (keys.length > 1) keys.sort();
  let out = '';
  for (const key of keys) {
    const v = record[key];
    if (v === undefined) continue;
    out += (out === '' ? '{' : ',') + (QUOTED.get(key) ?? JSON.stringify(key)) + ':' + canonical(v);
  }
  return out === '' ? '{}' : `${out}}`;
}

/**
 * SHA-256 in hex, in one call where Node has crypto.hash (20.12 and later): a Hash object
 * costs more than hashing a request's few hundred bytes.
 */
const sha256: (text: string) => string =
  typeof crypto.hash === 'function'
    ? (text) => crypto.hash('sha256', text, 'hex')
    : (text) => crypto.createHash('sha256').update(text).digest('hex');

export interface CachePolicy {
  /** CACHE_TTL_S; 0 turns the cache (and coalescing) off. */
  ttlS: number;
  /** CONFIG_FILE cache.allowTemperature: cache answers sampled with temperature > 0 too. */
  allowTemperature: boolean;
  /** UPSTREAM_MODEL: the model of chat requests that name none. */
  defaultModel: string;
  /** CONFIG_FILE `embeddingModel`: the model of embeddings requests that name none. */
  defaultEmbeddingModel: string;
}

/**
 * The request's cache key, or undefined when it must reach the upstream itself: the cache
 * is off, the device said `"cache": false`, or its answer is sampled (temperature > 0).
 * `route` names where routing sends this request (a priority may go to another model).
 */
export function cacheKeyOf(request: InferRequest, policy: CachePolicy, route: string): string | undefined {
  if (policy.ttlS === 0 || request.cache === false) return undefined;
  let parts: Record<string, unknown>;
  if (isEmbeddingRequest(request)) {
    // Embeddings are deterministic: no temperature to check.
    parts = { kind: 'embeddings', model: request.model ?? policy.defaultEmbeddingModel, input: request.input, route };
    for (const field of EMBEDDING_PASSTHROUGH_FIELDS) parts[field] = request[field];
  } else {
    if ((request.temperature ?? 0) > 0 && !policy.allowTemperature) return undefined;
    parts = { kind: 'chat', model: request.model ?? policy.defaultModel, messages: request.messages, route };
    for (const field of PASSTHROUGH_FIELDS) parts[field] = request[field];
  }
  return sha256(canonical(parts));
}
