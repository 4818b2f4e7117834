// A CBOR request's structure, walked before cbor-x decodes it. cbor-x has no option to turn its
// extensions off, and some cost more than linear time (a bignum, tag 2, is rebuilt byte by byte
// into a BigInt: seconds for tens of KB) or recurse without bound (nesting), so anything JSON
// could not have carried is refused here, in one pass over the bytes with no allocation
// proportional to them: tags, byte strings, `undefined` and other simple values, non-finite
// floats, map keys that are not text, indefinite-length text (cbor-x cannot read it), and nesting
// past MAX_NESTING_DEPTH. What passes decodes to exactly what JSON.parse could give.
import { MAX_NESTING_DEPTH, nestingTooDeep } from './json-depth.js';

/** Every malformation has this one message: the request's id, if any, cannot be trusted. */
export const NOT_CBOR = 'payload is not valid CBOR';
/** The count of an indefinite-length array or map: it ends at a break byte. */
const INDEFINITE = -1;
const BREAK = 0xff;

// Per open container: the items it still expects (or INDEFINITE), the items read, whether a map.
// Module-level scratch: the scan is synchronous and never re-entered.
const expected = new Float64Array(MAX_NESTING_DEPTH);
const read = new Float64Array(MAX_NESTING_DEPTH);
const isMap = new Uint8Array(MAX_NESTING_DEPTH);

/**
 * Why a CBOR request is refused before decoding, or undefined when it holds one well-formed item
 * of maps with text keys, arrays, text, finite numbers, booleans and null, no deeper than
 * MAX_NESTING_DEPTH.
 */
export function cborProblem(bytes: Uint8Array): string | undefined {
  const scan = { pos: 0, depth: 0 };
  for (;;) {
    const problem = scanItem(bytes, scan);
    if (problem !== undefined) return problem;
    if (scan.depth === 0) break;
  }
  return scan.pos === bytes.length ? undefined : NOT_CBOR;
}

interface Scan {
  pos: number;
  depth: number;
}

/** Reads one item's head (a container's items come in later calls); counts it once complete. */
function scanItem(bytes: Uint8Array, scan: Scan): string | undefined {
  if (scan.pos >= bytes.length) return NOT_CBOR;
  const initial = bytes[scan.pos] as number;
  scan.pos += 1;
  const top = scan.depth - 1;
  if (initial === BREAK) {
    if (top < 0 || expected[top] !== INDEFINITE) return NOT_CBOR;
    if (isMap[top] === 1 && (read[top] as number) % 2 === 1) return NOT_CBOR;
    scan.depth -= 1;
    return completed(scan);
  }
  const major = initial >> 5;
  if (top >= 0 && isMap[top] === 1 && (read[top] as number) % 2 === 0 && major !== 3) {
    return 'CBOR map keys must be text strings (JSON cannot carry others)';
  }
  const argument = argumentOf(bytes, scan, initial & 0x1f);
  if (typeof argument === 'string') return argument;
  if ((major === 4 || major === 5) && argument !== 0) return opened(bytes, scan, major, argument);
  if (major !== 4 && major !== 5) {
    const problem = scalarProblem(bytes, scan, major, initial & 0x1f, argument);
    if (problem !== undefined) return problem;
  }
  return completed(scan);
}

/** The argument of an item's head (a length, a value, or a float's bits, skipped), or why it cannot be read. */
function argumentOf(bytes: Uint8Array, scan: Scan, info: number): number | string {
  if (info < 24) return info;
  if (info === 31) return INDEFINITE;
  if (info > 27) return NOT_CBOR;
  const size = 1 << (info - 24);
  const at = scan.pos;
  if (at + size > bytes.length) return NOT_CBOR;
  scan.pos += size;
  let value = 0;
  for (let i = 0; i < size; i++) value = value * 256 + (bytes[at + i] as number);
  return value;
}

/** Opens a non-empty array or map: its items come next, and it is complete after the last. */
function opened(bytes: Uint8Array, scan: Scan, major: number, count: number): string | undefined {
  if (scan.depth >= MAX_NESTING_DEPTH) return nestingTooDeep;
  const items = count === INDEFINITE ? INDEFINITE : major === 5 ? count * 2 : count;
  // Each item takes a byte at least: a count beyond the bytes left is a lie.
  if (items > bytes.length - scan.pos) return NOT_CBOR;
  expected[scan.depth] = items;
  read[scan.depth] = 0;
  isMap[scan.depth] = major === 5 ? 1 : 0;
  scan.depth += 1;
  return undefined;
}

/** Why a non-container item is refused, or undefined. */
function scalarProblem(bytes: Uint8Array, scan: Scan, major: number, info: number, argument: number): string | undefined {
  switch (major) {
    case 0:
    case 1:
      return argument === INDEFINITE ? NOT_CBOR : undefined;
    case 2:
      return 'CBOR byte strings are not accepted (JSON cannot carry them)';
    case 3:
      if (argument === INDEFINITE) return 'CBOR indefinite-length text strings are not accepted (give the length)';
      if (argument > bytes.length - scan.pos) return NOT_CBOR;
      scan.pos += argument;
      return undefined;
    case 6:
      return 'CBOR tags are not accepted (JSON cannot carry them)';
    default:
      return simpleProblem(bytes, scan.pos, info);
  }
}

/** Major type 7: false, true, null and finite floats pass. */
function simpleProblem(bytes: Uint8Array, end: number, info: number): string | undefined {
  if (info >= 20 && info <= 22) return undefined;
  if (info === 23) return 'CBOR undefined is not accepted (JSON cannot carry it)';
  if (info >= 25 && info <= 27) return finiteFloat(bytes, end, info) ? undefined : 'non-finite numbers are not accepted (JSON cannot carry them)';
  return 'CBOR simple values other than false, true and null are not accepted (JSON cannot carry them)';
}

/** Whether the half, single or double float ending at `end` is finite: its exponent is not all ones. */
function finiteFloat(bytes: Uint8Array, end: number, info: number): boolean {
  const size = 1 << (info - 24);
  const high = ((bytes[end - size] as number) << 8) | (bytes[end - size + 1] as number);
  const exponentMask = info === 25 ? 0x7c00 : info === 26 ? 0x7f80 : 0x7ff0;
  return (high & exponentMask) !== exponentMask;
}

/** Counts a complete item in its container, closing every container that it fills. */
function completed(scan: Scan): undefined {
  while (scan.depth > 0) {
    const top = scan.depth - 1;
    read[top] = (read[top] as number) + 1;
    if (expected[top] === INDEFINITE || (read[top] as number) < (expected[top] as number)) return undefined;
    scan.depth -= 1;
  }
  return undefined;
}
