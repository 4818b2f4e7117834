// The CBOR codec of the contract: a request decodes to what JSON.parse would give for the same
// request, anything JSON could not carry is refused before cbor-x decodes it, and a reply
// encodes as plain CBOR. The scan itself, case by case: cbor-scan.test.ts.
import { decode, encode, Encoder } from 'cbor-x';
import { describe, expect, it } from 'vitest';
import { decodeCbor, encodeCbor } from '../../contract/cbor.js';
import { InferRequestSchema, isCborRequest, requestPropertiesOf, type OkReply } from '../../contract/index.js';

const template = { id: 'r1', template: 'defect-check', vars: { part: 'A7', mm: 0.31 } };
const chat = { id: 'r2', messages: [{ role: 'user', content: 'Part A7: burr height 0.31 mm. Reject?' }], temperature: 0.2, max_tokens: 64, cache: false };

/** The refusal's message, or null when the decoded value is accepted. */
function refusal(payload: Buffer): string | null {
  try {
    decodeCbor(payload);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

describe('decodeCbor', () => {
  it('gives what JSON.parse gives, so the schema reads both alike', () => {
    for (const request of [template, chat]) {
      const decoded = decodeCbor(encode(request));
      expect(decoded).toEqual(JSON.parse(JSON.stringify(request)));
      expect(Object.getPrototypeOf(decoded)).toBe(Object.prototype);
      expect(InferRequestSchema.safeParse(decoded)).toEqual(InferRequestSchema.safeParse(JSON.parse(JSON.stringify(request))));
      expect(refusal(encode(request))).toBeNull();
    }
  });

  it('refuses what is not CBOR: truncated, trailing bytes, empty, a reserved length', () => {
    const whole = encode(chat);
    for (const bad of [whole.subarray(0, 10), Buffer.concat([whole, Buffer.from([0x01])]), Buffer.alloc(0), Buffer.from([0x1c]), Buffer.from('{"id":"x"}')]) {
      expect(() => decodeCbor(bad)).toThrow('payload is not valid CBOR');
    }
  });

  it('refuses values JSON cannot carry, naming what', () => {
    const shared = new Encoder({ structuredClone: true });
    const cyclic: Record<string, unknown> = { id: 'c' };
    cyclic.self = cyclic;
    const cases: [Buffer, RegExp][] = [
      [encode({ id: 'a', when: new Date(0) }), /CBOR tags are not accepted/], // tag 1
      [encode({ id: 'a', raw: Buffer.from('x') }), /CBOR byte strings are not accepted/],
      [encode({ id: 'a', v: undefined }), /CBOR undefined is not accepted/],
      [encode({ id: 'a', v: 2n ** 70n }), /CBOR tags are not accepted/], // bignum, tag 2
      [encode({ id: 'a', v: Infinity }), /non-finite numbers are not accepted/],
      [Buffer.from([0xe0]), /CBOR simple values other than false, true and null/], // simple value 0
      [encode({ id: 'a', v: new Float32Array([1]) }), /CBOR tags are not accepted/], // typed array tag
      [shared.encode(cyclic), /CBOR tags are not accepted/], // shared values, tags 28/29
    ];
    for (const [payload, message] of cases) {
      expect(refusal(payload)).toMatch(message);
      expect(refusal(payload)).toMatch(/JSON cannot carry/);
    }
  });

  it('refuses a graph of shared values at once rather than walking every path', () => {
    let node: Record<string, unknown> = { leaf: 1 };
    for (let i = 0; i < 64; i++) node = { a: node, b: node };
    const started = performance.now();
    expect(refusal(new Encoder({ structuredClone: true }).encode(node))).toMatch(/JSON cannot carry/);
    expect(performance.now() - started).toBeLessThan(500);
  });

  it('refuses nesting deeper than 64 levels before decoding, however deep', () => {
    expect(refusal(Buffer.concat([Buffer.alloc(200_000, 0x81), Buffer.from([0x00])]))).toBe('nesting deeper than 64 levels');
  });

  it('refuses a bignum around a large byte string in linear time (cbor-x alone takes seconds)', () => {
    const head = Buffer.from([0xa2, 0x62, 0x69, 0x64, 0x61, 0x61, 0x61, 0x76, 0xc2, 0x5a, 0, 0, 0, 0]);
    head.writeUInt32BE(262_000, 10);
    const started = performance.now();
    expect(refusal(Buffer.concat([head, Buffer.alloc(262_000, 0xff)]))).toMatch(/CBOR tags are not accepted/);
    expect(performance.now() - started).toBeLessThan(100);
  });

  it('reads a 64-bit integer as a number, as JSON.parse reads a long one', () => {
    const eight = Buffer.from([0xa1, 0x61, 0x6e, 0x1b, 0, 0, 0, 0, 0, 0, 0, 5]);
    expect(decodeCbor(eight)).toEqual({ n: 5 });
  });

  it('never lets a __proto__ key reach an object prototype', () => {
    const payload = Buffer.concat([Buffer.from([0xa1, 0x69]), Buffer.from('__proto__'), encode({ polluted: true })]);
    const decoded = decodeCbor(payload) as Record<string, unknown>;
    expect(Object.getPrototypeOf(decoded)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(decoded.polluted).toBeUndefined();
  });
});

describe('encodeCbor', () => {
  it('writes a reply as plain CBOR maps that any decoder reads back as its JSON', () => {
    const reply: OkReply = {
      id: 'r1',
      ok: true,
      model: 'm',
      content: 'yes',
      finish_reason: 'stop',
      cached: false,
      attempts: 1,
      priority: 'normal',
      timing: { queued_ms: 1, upstream_ms: 20, total_ms: 22 },
    };
    const bytes = encodeCbor(reply);
    expect(bytes[0]).toBe(0xa0 + 9); // a map of 9 pairs in its header byte: no record tag, no 16-bit size
    expect(decode(bytes)).toEqual(JSON.parse(JSON.stringify(reply)));
    expect(bytes.length).toBeLessThan(Buffer.byteLength(JSON.stringify(reply)));
  });
});

describe('the Content Type of a request', () => {
  it('asks for CBOR only with application/cbor (any case, parameters ignored); JSON otherwise', () => {
    const cbor = (contentType?: string): boolean => isCborRequest(requestPropertiesOf({ contentType }));
    expect([cbor('application/cbor'), cbor('Application/CBOR; x=1')]).toEqual([true, true]);
    expect([cbor('application/json'), cbor(undefined), cbor('text/plain'), cbor('application/cbor-seq')]).toEqual([false, false, false, false]);
    expect(isCborRequest(requestPropertiesOf(undefined))).toBe(false);
  });
});
