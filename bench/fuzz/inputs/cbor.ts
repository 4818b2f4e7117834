// CBOR inputs (MQTT 5 Content Type application/cbor): random values through cbor-x, valid
// requests with a tagged or binary field, and hand-made items a generic encoder never writes:
// bignums around long byte strings, deep nesting, lengths the payload does not hold.
import { Encoder, Tag } from 'cbor-x';
import fc from 'fast-check';
import { hostileFields, validChat, type InputContext } from './values.js';

const encoder = new Encoder({ useRecords: false });

/** A CBOR head: major type and argument, in the shortest form (RFC 8949 3.). */
export function cborHead(major: number, argument: number): Buffer {
  const m = major << 5;
  if (argument < 24) return Buffer.from([m | argument]);
  if (argument < 2 ** 8) return Buffer.from([m | 24, argument]);
  if (argument < 2 ** 16) return Buffer.from([m | 25, argument >> 8, argument & 0xff]);
  const b = Buffer.alloc(5);
  b[0] = m | 26;
  b.writeUInt32BE(argument, 1);
  return b;
}

/** Tag `tag` (2 and 3 are bignums) around a byte string of `size` bytes. */
export function taggedBytes(tag: number, size: number, fill: number): Buffer {
  return Buffer.concat([cborHead(6, tag), cborHead(2, size), Buffer.alloc(size, fill)]);
}

/** A map {"id": "c", "messages": <item>}: the item where a request's field would be. */
function inRequest(item: Buffer): Buffer {
  const text = (s: string): Buffer => Buffer.concat([cborHead(3, Buffer.byteLength(s)), Buffer.from(s)]);
  return Buffer.concat([cborHead(5, 2), text('id'), text('c'), text('messages'), item]);
}

function sized(ctx: InputContext): fc.Arbitrary<number> {
  // Mostly small: the large ones are the ones a quadratic decoder chokes on.
  return fc.oneof(
    { weight: 8, arbitrary: fc.integer({ min: 1, max: 1024 }) },
    { weight: 2, arbitrary: fc.integer({ min: 1024, max: 64 * 1024 }) },
    { weight: 1, arbitrary: fc.integer({ min: 64 * 1024, max: ctx.maxPayloadBytes - 64 }) },
  );
}

const anyValue = fc.anything({
  withBigInt: true,
  withTypedArray: true,
  withMap: true,
  withSet: true,
  withDate: true,
  withNullPrototype: true,
  withBoxedValues: true,
  withSparseArray: true,
  maxDepth: 4,
});

function encode(value: unknown): Buffer {
  try {
    return Buffer.from(encoder.encode(value));
  } catch {
    return Buffer.from([0xf7]); // undefined: what cbor-x cannot encode is no loss to the fuzzer
  }
}

export function cborPayload(ctx: InputContext): fc.Arbitrary<Buffer> {
  const tagged = fc
    .tuple(fc.constantFrom(0, 1, 2, 3, 4, 5, 21, 24, 25, 28, 29, 32, 64, 72, 258, 259, 55799, 2 ** 32 - 1), anyValue)
    .map(([tag, v]) => new Tag(v, tag));
  return fc.oneof(
    anyValue.map(encode),
    fc.oneof(validChat, hostileFields).map(encode),
    fc
      .tuple(
        validChat,
        fc.constantFrom('messages', 'model', 'lock', 'max_tokens', 'id'),
        fc.oneof(tagged, fc.uint8Array({ maxLength: 64 }), fc.bigInt(), fc.date()),
      )
      .map(([r, field, v]) => encode({ ...r, [field]: v })),
    fc
      .tuple(fc.constantFrom(2, 3), sized(ctx), fc.integer({ min: 0, max: 255 }), fc.boolean())
      .map(([tag, size, fill, wrapped]) => (wrapped ? inRequest(taggedBytes(tag, size, fill)) : taggedBytes(tag, size, fill))),
    fc
      .tuple(fc.integer({ min: 10, max: 100_000 }), fc.constantFrom(0x81, 0xa1, 0xc6, 0x9f))
      .map(([depth, head]) =>
        head === 0xa1
          ? Buffer.concat([Buffer.alloc(depth * 2, Buffer.from([0xa1, 0x00])), Buffer.from([0x00])])
          : Buffer.concat([Buffer.alloc(depth, head), Buffer.from([0x00])]),
      ),
    fc
      .tuple(fc.integer({ min: 0, max: 7 }), fc.constantFrom(27, 26, 31), fc.uint8Array({ maxLength: 16 }))
      .map(([major, info, rest]) => Buffer.concat([Buffer.from([(major << 5) | info, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]), rest])),
    fc.uint8Array({ maxLength: 512 }).map((b) => Buffer.from(b)),
  );
}
