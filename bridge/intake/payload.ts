// A request's payload as a value. Checked before it is parsed (how deep it nests, and what CBOR
// may hold), so that parsing and everything after it (the schemas, the cache key, the upstream
// body) take time linear in its size and never overflow the stack.
import { decodeCbor } from '../../contract/cbor.js';
import { NOT_CBOR } from '../../contract/cbor-scan.js';
import { BridgeError } from '../../contract/index.js';
import { jsonNestingProblem } from '../../contract/json-depth.js';
import { sniffCborId, sniffId } from './request-id.js';

/**
 * The payload as a value, or the `invalid_request` that refuses it. A refusal of what
 * well-formed bytes hold names the id their head shows (`seen.id`); malformed bytes name none.
 */
export function decodePayload(payload: Buffer, cbor: boolean, seen: { id: string | null }): unknown {
  if (!cbor) {
    const tooDeep = jsonNestingProblem(payload);
    if (tooDeep === undefined) return parseJson(payload);
    seen.id = sniffId(payload);
    throw new BridgeError('invalid_request', tooDeep);
  }
  try {
    return decodeCbor(payload);
  } catch (err) {
    if (err instanceof BridgeError && err.message !== NOT_CBOR) seen.id = sniffCborId(payload);
    throw err;
  }
}

function parseJson(payload: Buffer): unknown {
  try {
    return JSON.parse(payload.toString('utf8'));
  } catch {
    throw new BridgeError('invalid_request', 'payload is not valid JSON');
  }
}
