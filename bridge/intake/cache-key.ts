// The response cache's key: SHA-256 of the canonical request — its kind (chat or
// embeddings), model, messages or input and the passthrough parameters, with object keys
// sorted — never the id, lock or ttl.
import * as crypto from 'node:crypto';
import { EMBEDDING_PASSTHROUGH_FIELDS, PASSTHROUGH_FIELDS, isEmbeddingRequest, type InferRequest } from '../../contract/index.js';

/**
 * JSON with object keys sorted at every depth, so equal requests give equal text. It runs for
 * every request: JSON.stringify writes a copy whose keys were inserted in order (only the
 * objects out of order are copied), which allocates a quarter of what building the text by
 * hand does. A key JSON.stringify would move (an array index, `__proto__`) takes the hand-built way.
 */
function canonical(value: unknown): string {
  const ordered = sorted(value);
  return ordered === MOVED ? canonicalText(value) : JSON.stringify(ordered);
}

/** The same text, built by hand. */
function canonicalText(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i += 1) out += (i === 0 ? '' : ',') + canonicalText(value[i]);
    return `${out}]`;
  }
  const record = value as Record<string, unknown>;
  let out = '{';
  for (const key of Object.keys(record).sort()) {
    const v = record[key];
    if (v === undefined) continue;
    out += `${out.length === 1 ? '' : ','}${JSON.stringify(key)}:${canonicalText(v)}`;
  }
  return `${out}}`;
}

/** A key JSON.stringify would not write in insertion order (or that an assignment would not set). */
const MOVED = Symbol('moved');

function keepsItsPlace(key: string): boolean {
  const first = key.charCodeAt(0);
  return !(first >= 48 && first <= 57) && key !== '__proto__';
}

/** `value`, or a copy of it whose objects have their keys in sorted order; MOVED when none can. */
function sorted(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  return Array.isArray(value) ? sortedArray(value) : sortedRecord(value as Record<string, unknown>);
}

function sortedArray(array: unknown[]): unknown {
  let out: unknown[] | undefined;
  for (let i = 0; i < array.length; i += 1) {
    const item = sorted(array[i]);
    if (item === MOVED) return MOVED;
    if (out === undefined && item !== array[i]) out = array.slice(0, i);
    out?.push(item);
  }
  return out ?? array;
}

function sortedRecord(record: Record<string, unknown>): unknown {
  const keys = Object.keys(record);
  let inOrder = true;
  for (let i = 0; i < keys.length; i += 1) {
    if (!keepsItsPlace(keys[i] as string)) return MOVED;
    if (i > 0 && (keys[i - 1] as string) > (keys[i] as string)) inOrder = false;
  }
  if (!inOrder) insertionSort(keys);
  let out: Record<string, unknown> | undefined = inOrder ? undefined : {};
  for (let i = 0; i < keys.length; i += 1) {
    const key = keys[i] as string;
    const item = sorted(record[key]);
    if (item === MOVED) return MOVED;
    if (out === undefined && item !== record[key]) out = copyOf(record, keys, i);
    if (out !== undefined && item !== undefined) out[key] = item;
  }
  return out ?? record;
}

/** The first `count` of `keys` (in order) of `record`. */
function copyOf(record: Record<string, unknown>, keys: string[], count: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i < count; i += 1) {
    const key = keys[i] as string;
    if (record[key] !== undefined) out[key] = record[key];
  }
  return out;
}

/** In place, as Array.prototype.sort would order them, without its allocations (a request's objects have few keys). */
function insertionSort(keys: string[]): void {
  for (let i = 1; i < keys.length; i += 1) {
    const key = keys[i] as string;
    let j = i - 1;
    while (j >= 0 && (keys[j] as string) > key) {
      keys[j + 1] = keys[j] as string;
      j -= 1;
    }
    keys[j + 1] = key;
  }
}

/**
 * SHA-256 in hex, in one call where Node has crypto.hash (20.12 and later): a Hash object
 * costs more than hashing a request's few hundred bytes.
 */
const sha256: (text: string) => string =
  typeof crypto.hash === 'function' ? (text) => crypto.hash('sha256', text, 'hex') : (text) => crypto.createHash('sha256').update(text).digest('hex');

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
