// CBOR payloads (RFC 8949), the compact alternative to JSON a device asks for with the MQTT 5
// Content Type `application/cbor`. A request decodes to exactly what JSON could have carried,
// so the schemas read it as they read JSON. Not re-exported by index.ts: only the bridge's
// intake and results load cbor-x.
import { Decoder, Encoder, type Options } from 'cbor-x';
import { cborProblem } from './cbor-scan.js';
import { BridgeError } from './errors.js';

// Maps as plain objects, as JSON.parse gives them (cbor-x renames a `__proto__` key); a 64-bit
// integer as a number, as JSON.parse reads a long one, never a BigInt (the upstream body could not
// be serialized). int64AsNumber is read by cbor-x but missing from its typings.
const decoder = new Decoder({ mapsAsObjects: true, int64AsNumber: true } as Options);
// Plain CBOR maps (no cbor-x records), each map header as short as its size allows.
const encoder = new Encoder({ useRecords: false, variableMapSize: true });

/**
 * A request payload, decoded; `invalid_request` naming the cause when it is not CBOR or holds what
 * JSON could not carry. The structure is checked first (cbor-scan.ts), so cbor-x only ever decodes
 * maps, arrays, text, numbers, booleans and null, in time linear in the payload's size.
 */
export function decodeCbor(payload: Buffer): unknown {
  const problem = cborProblem(payload);
  if (problem !== undefined) throw new BridgeError('invalid_request', problem);
  try {
    return decoder.decode(payload);
  } catch {
    throw new BridgeError('invalid_request', 'payload is not valid CBOR');
  }
}

/** A reply as CBOR: the same fields as its JSON. */
export function encodeCbor(value: unknown): Buffer {
  return encoder.encode(value);
}
