// The checks a request's bytes pass before they are parsed: the CBOR structure scan (what JSON
// could not carry, nesting, malformation) and the JSON nesting scan. Both take one pass over the
// bytes, so every refusal here is also fast whatever the payload's size.
import { encode } from 'cbor-x';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeCbor } from '../../contract/cbor.js';
import { cborProblem, NOT_CBOR } from '../../contract/cbor-scan.js';
import { jsonNestingProblem, MAX_NESTING_DEPTH } from '../../contract/json-depth.js';

const bytes = (...values: number[]): Buffer => Buffer.from(values);
/** `depth` arrays of one element inside one another around `inner` (definite or indefinite length). */
const nested = (depth: number, inner: number[], indefinite = false): Buffer =>
  indefinite ? bytes(...Array<number>(depth).fill(0x9f), ...inner, ...Array<number>(depth).fill(0xff)) : bytes(...Array<number>(depth).fill(0x81), ...inner);
const TOO_DEEP = `nesting deeper than ${MAX_NESTING_DEPTH} levels`;

describe('cborProblem', () => {
  it('passes what JSON can carry: maps with text keys, arrays, text, integers, finite floats, booleans, null', () => {
    expect(cborProblem(encode({ id: 'a', n: [1, -2, 2 ** 40, 0.5, 1e300, true, false, null, 'ü', ''], m: {}, e: [] }))).toBeUndefined();
    expect(cborProblem(bytes(0xf9, 0x3c, 0x00))).toBeUndefined(); // half float 1.0
    expect(cborProblem(bytes(0xfa, 0x3f, 0x80, 0, 0))).toBeUndefined(); // single float 1.0
  });

  it('passes nesting up to 64 levels, definite or indefinite, and refuses the 65th', () => {
    expect(cborProblem(nested(MAX_NESTING_DEPTH, [0x00]))).toBeUndefined();
    expect(cborProblem(nested(MAX_NESTING_DEPTH, [0x00], true))).toBeUndefined();
    expect(cborProblem(nested(MAX_NESTING_DEPTH + 1, [0x00]))).toBe(TOO_DEEP);
    expect(cborProblem(nested(MAX_NESTING_DEPTH + 1, [0x00], true))).toBe(TOO_DEEP);
    // Maps count as levels too: {"a": {"a": …}}.
    const maps = Buffer.concat([...Array<Buffer>(MAX_NESTING_DEPTH + 1).fill(bytes(0xa1, 0x61, 0x61)), bytes(0x00)]);
    expect(cborProblem(maps)).toBe(TOO_DEEP);
    // Siblings do not add up: 10 000 arrays side by side are one level.
    expect(cborProblem(Buffer.concat([bytes(0x99, 0x27, 0x10), Buffer.alloc(10_000, 0x80)]))).toBeUndefined();
  });

  it('refuses every tag, whatever it wraps: bignums, dates, shared values, cbor-x records', () => {
    for (const tagged of [
      bytes(0xc2, 0x41, 0x01),
      bytes(0xc3, 0x41, 0x01),
      bytes(0xc1, 0x00),
      bytes(0xd8, 0x1c, 0x80),
      bytes(0xd9, 0xdf, 0xff, 0x80),
      bytes(0xdb, 0, 0, 0, 0, 0, 0, 0, 1, 0x00),
    ]) {
      expect(cborProblem(tagged)).toBe('CBOR tags are not accepted (JSON cannot carry them)');
    }
    expect(cborProblem(encode({ id: 'x', deep: { v: new Date(0) } }))).toMatch(/tags/);
  });

  it('refuses byte strings (definite or indefinite), undefined, other simple values and non-finite floats', () => {
    expect(cborProblem(bytes(0x41, 0x00))).toMatch(/byte strings/);
    expect(cborProblem(bytes(0x5f, 0x41, 0x00, 0xff))).toMatch(/byte strings/);
    expect(cborProblem(bytes(0xf7))).toMatch(/undefined/);
    expect(cborProblem(bytes(0xf0))).toMatch(/simple values/);
    expect(cborProblem(bytes(0xf8, 0x20))).toMatch(/simple values/);
    for (const nonFinite of [
      bytes(0xf9, 0x7c, 0x00),
      bytes(0xf9, 0x7e, 0x00),
      bytes(0xfa, 0x7f, 0x80, 0, 0),
      bytes(0xfb, 0xff, 0xf0, 0, 0, 0, 0, 0, 0),
      bytes(0xfb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 1),
    ]) {
      expect(cborProblem(nonFinite)).toMatch(/non-finite numbers/);
    }
  });

  it('refuses map keys that are not text, and indefinite-length text', () => {
    expect(cborProblem(bytes(0xa1, 0x01, 0x02))).toMatch(/map keys must be text strings/);
    expect(cborProblem(bytes(0xbf, 0x80, 0x00, 0xff))).toMatch(/map keys must be text strings/);
    expect(cborProblem(bytes(0x7f, 0x61, 0x61, 0xff))).toMatch(/indefinite-length text strings/);
    // Indefinite-length arrays and maps are read: {_ "a": [_ 1, 2]}.
    expect(cborProblem(bytes(0xbf, 0x61, 0x61, 0x9f, 0x01, 0x02, 0xff, 0xff))).toBeUndefined();
    expect(decodeCbor(bytes(0xbf, 0x61, 0x61, 0x9f, 0x01, 0x02, 0xff, 0xff))).toEqual({ a: [1, 2] });
  });

  it('refuses malformed bytes as not CBOR: truncated heads, lengths and containers, breaks, reserved values, trailing bytes', () => {
    const malformed = [
      bytes(),
      bytes(0x18), // a one-byte argument missing
      bytes(0x1b, 0, 0, 0), // an eight-byte argument cut short
      bytes(0x63, 0x61, 0x62), // text of 3 with 2 bytes
      bytes(0x7b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), // text longer than the payload
      bytes(0x82, 0x01), // an array of 2 with 1 item
      bytes(0x9b, 0, 0, 0, 1, 0, 0, 0, 0), // an array counting more items than bytes left
      bytes(0xa1, 0x61, 0x61), // a key without its value
      bytes(0x9f, 0x01), // an indefinite array never ended
      bytes(0xbf, 0x61, 0x61, 0xff), // an indefinite map ended after a key
      bytes(0xff), // a break outside any container
      bytes(0x81, 0xff), // a break in a definite array
      bytes(0x1c), // reserved additional information
      bytes(0x1f), // an integer of indefinite length
      bytes(0x01, 0x02), // two items
    ];
    for (const bad of malformed) expect([bad.toString('hex'), cborProblem(bad)]).toEqual([bad.toString('hex'), NOT_CBOR]);
  });

  it('accepts exactly what cbor-x encodes from JSON values, and decodes it to the same value', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), (value) => {
        const json = JSON.parse(JSON.stringify(value)) as unknown;
        const payload = encode(json);
        expect(cborProblem(payload)).toBeUndefined();
        expect(decodeCbor(payload)).toEqual(json);
      }),
      { seed: 27, numRuns: 300 },
    );
  });

  it('never throws on mutated or random bytes, and what it passes cbor-x decodes without tags or BigInts', () => {
    const base = encode({ id: 'r1', messages: [{ role: 'user', content: 'is part 7 scratched?' }], max_tokens: 64, temperature: 0.5 });
    const mutated = fc.array(fc.tuple(fc.nat(base.length - 1), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }).map((edits) => {
      const copy = Buffer.from(base);
      for (const [at, value] of edits) copy[at] = value;
      return copy;
    });
    fc.assert(
      fc.property(
        fc.oneof(
          mutated,
          fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)),
        ),
        (payload) => {
          const problem = cborProblem(payload);
          if (problem !== undefined) return;
          const value = decodeCbor(payload);
          expect(() => JSON.stringify(value)).not.toThrow();
        },
      ),
      { seed: 27, numRuns: 2000 },
    );
  });
});

describe('jsonNestingProblem', () => {
  const deep = (depth: number, open = '[', close = ']'): Buffer => Buffer.from(open.repeat(depth) + close.repeat(depth));

  it('passes 64 levels of arrays or objects and refuses the 65th', () => {
    expect(jsonNestingProblem(deep(MAX_NESTING_DEPTH))).toBeUndefined();
    expect(jsonNestingProblem(deep(MAX_NESTING_DEPTH + 1))).toBe(TOO_DEEP);
    const objects = Buffer.from('{"a":'.repeat(MAX_NESTING_DEPTH + 1) + '1' + '}'.repeat(MAX_NESTING_DEPTH + 1));
    expect(jsonNestingProblem(objects)).toBe(TOO_DEEP);
    expect(jsonNestingProblem(deep(100_000))).toBe(TOO_DEEP);
  });

  it('counts no bracket inside a string, escaped quotes included', () => {
    expect(jsonNestingProblem(Buffer.from(JSON.stringify({ id: 'x', text: '['.repeat(1000) + '"\\' + '{'.repeat(1000) })))).toBeUndefined();
    expect(jsonNestingProblem(Buffer.from(`["\\\\", ${'['.repeat(MAX_NESTING_DEPTH)}${']'.repeat(MAX_NESTING_DEPTH)}]`))).toBe(TOO_DEEP);
  });

  it('agrees with the depth of any JSON value', () => {
    const depthOf = (value: unknown): number => (typeof value === 'object' && value !== null ? 1 + Math.max(0, ...Object.values(value).map(depthOf)) : 0);
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 70 }), (value) => {
        const refused = jsonNestingProblem(Buffer.from(JSON.stringify(value))) !== undefined;
        expect(refused).toBe(depthOf(value) > MAX_NESTING_DEPTH);
      }),
      { seed: 27, numRuns: 300 },
    );
  });
});
