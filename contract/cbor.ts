// CBOR payloads (RFC 8949), the compact alternative to JSON a device asks for with the MQTT 5
// Content Type `application/cbor`. A request decodes to exactly what JSON could have carried,
// so the schemas read it as they read JSON. Not re-exported by index.ts: only the bridge's
// intake and results load cbor-x.
import { Decoder, Encoder } from 'cbor-x';
import { BridgeError } from './errors.js';

// Maps as plain objects, as JSON.parse gives them (cbor-x renames a `__proto__` key).
const decoder = new Decoder({ mapsAsObjects: true });
// Plain CBOR maps (no cbor-x records), each map header as short as its size allows.
const encoder = new Encoder({ useRecords: false, variableMapSize: true });

/** A request payload, decoded; `invalid_request` when it is not CBOR. */
export function decodeCbor(payload: Buffer): unknown {
  try {
    return decoder.decode(payload);
  } catch {
    throw new BridgeError('invalid_request', 'payload is not valid CBOR');
  }
}

/**
 * Refuses a decoded request holding what JSON could not carry, so the schemas read it exactly
 * as they read JSON (kept apart from decoding so the refusal can name the request's id).
 */
export function requireJsonShaped(value: unknown): void {
  let plain: boolean;
  try {
    plain = jsonShaped(value, new Set());
  } catch {
    plain = false; // nested too deep for the stack
  }
  if (!plain) {
    throw new BridgeError('invalid_request', 'payload is CBOR that JSON cannot carry (a tag, byte string, undefined, shared value or non-finite number)');
  }
}

/** A reply as CBOR: the same fields as its JSON. */
export function encodeCbor(value: unknown): Buffer {
  return encoder.encode(value);
}

/**
 * Whether a decoded value holds only what JSON can: tags (dates, big numbers, typed arrays),
 * byte strings and undefined would reach the schemas' loose fields and the upstream body, and
 * shared values (tags 28/29) could make a cycle. Each object is visited once, so a graph of
 * shared values cannot make the walk blow up.
 */
function jsonShaped(value: unknown, seen: Set<object>): boolean {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (typeof value !== 'object' || seen.has(value)) return false;
  seen.add(value);
  if (Array.isArray(value)) return value.every((item) => jsonShaped(item, seen));
  if (Object.getPrototypeOf(value) !== Object.prototype) return false;
  for (const key in value) if (!jsonShaped((value as Record<string, unknown>)[key], seen)) return false;
  return true;
}
