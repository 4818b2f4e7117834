// How deep a request may nest, checked on the payload's bytes before it is parsed. JSON.parse
// itself copes with any depth, but everything after it walks the value recursively (the schemas,
// the cache key, the upstream body's serialization), and a deep enough value overflows the stack
// there: one pass over the bytes, no allocation, refuses it first with a reason the device can
// act on.

/** Arrays and objects (CBOR arrays and maps) inside one another, the request itself included. */
export const MAX_NESTING_DEPTH = 64;

export const nestingTooDeep = `nesting deeper than ${MAX_NESTING_DEPTH} levels`;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;

/**
 * Why a JSON payload nests too deep, or undefined. Brackets inside strings are not counted (a
 * string is skipped to its closing quote by a native search); malformed JSON is left to
 * JSON.parse. UTF-8 multi-byte sequences never hold an ASCII byte, so the bytes can be read
 * without decoding them.
 */
export function jsonNestingProblem(payload: Buffer): string | undefined {
  let depth = 0;
  for (let i = 0; i < payload.length; i++) {
    const byte = payload[i];
    if (byte === QUOTE) {
      i = closingQuote(payload, i);
      if (i < 0) return undefined;
    } else if (byte === OPEN_ARRAY || byte === OPEN_OBJECT) {
      depth += 1;
      if (depth > MAX_NESTING_DEPTH) return nestingTooDeep;
    } else if (byte === CLOSE_ARRAY || byte === CLOSE_OBJECT) {
      depth -= 1;
    }
  }
  return undefined;
}

/** The index of the quote that ends the string opened at `open`, or -1. Each run of backslashes is read once. */
function closingQuote(payload: Buffer, open: number): number {
  let at = open;
  for (;;) {
    at = payload.indexOf(QUOTE, at + 1);
    if (at < 0) return -1;
    let backslashes = 0;
    while (payload[at - 1 - backslashes] === BACKSLASH) backslashes += 1;
    if (backslashes % 2 === 0) return at;
  }
}
