// The CBOR codec of the contract: a request decodes to what JSON.parse would give for the same
// request, anything JSON could not carry is refused, and a reply encodes as plain CBOR.
import { decode, encode, Encoder } from 'cbor-x';
import { describe, expect, it } from 'vitest';
import { decodeCbor, encodeCbor, requireJsonShaped } from '../../contract/cbor.js';
import { InferRequestSchema, isCborRequest, requestPropertiesOf, type OkReply } from '../../contract/index.js';

const template = { id: 'r1', template: 'defect-check', vars: { part: 'A7', mm: 0.31 } };
const chat = { id: 'r2', messages: [{ role: 'user', content: 'Part A7: burr height 0.31 mm. Reject?' }], temperature: 0.2, max_tokens: 64, cache: false };

/** The refusal's message, or null when the decoded value is accepted. */
function refusal(payload: Buffer): string | null {
  try {
    requireJsonShaped(decodeCbor(payload));
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

  it('refuses what is not CBOR: truncated, trailing bytes, empty, a reserved simple value', () => {
    const whole = encode(chat);
    for (const bad of [whole.subarray(0, 10), Buffer.concat([whole, Buffer.from([0x01])]), Buffer.alloc(0), Buffer.from([0xe0]), Buffer.from('{"id":"x"}')]) {
      expect(() => decodeCbor(bad)).toThrow('payload is not valid CBOR');
    }
  });

  it('refuses values JSON cannot carry', () => {
    const shared = new Encoder({ structuredClone: true });
    const cyclic: Record<string, unknown> = { id: 'c' };
    cyclic.self = cyclic;
    const cases = [
      encode({ id: 'a', when: new Date(0) }), // tag 1
      encode({ id: 'a', raw: Buffer.from('x') }), // byte string
      encode({ id: 'a', v: undefined }),
      encode({ id: 'a', v: 2n ** 70n }), // bignum tag
      encode({ id: 'a', v: Infinity }),
      encode({ id: 'a', v: new Float32Array([1]) }), // typed array tag
      shared.encode(cyclic), // shared values, tags 28/29
    ];
    for (const payload of cases) expect(refusal(payload)).toMatch(/JSON cannot carry/);
  });

  it('refuses a graph of shared values at once rather than walking every path', () => {
    let node: Record<string, unknown> = { leaf: 1 };
    for (let i = 0; i < 64; i++) node = { a: node, b: node };
    const started = performance.now();
    expect(refusal(new Encoder({ structuredClone: true }).encode(node))).toMatch(/JSON cannot carry/);
    expect(performance.now() - started).toBeLessThan(500);
  });

  it('refuses nesting too deep for the stack as CBOR it cannot read', () => {
    expect(refusal(Buffer.alloc(200_000, 0x81))).toMatch(/CBOR/);
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
      id: 'r1', ok: true, model: 'm', content: 'yes', finish_reason: 'stop', cached: false, attempts: 1, priority: 'normal',
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
