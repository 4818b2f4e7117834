// Building blocks of the generators: valid requests, the values a careless or hostile device
// puts in their fields, and JSON nested or sized beyond reason.
import fc from 'fast-check';
import { PRIORITIES } from '../../../contract/topics.js';

export interface InputContext {
  /** The attacker's device id. */
  self: string;
  /** The innocent device's id (the target of identity and topic attacks). */
  innocent: string;
  maxPayloadBytes: number;
  imageMaxBytes: number;
  templates: { chat: string; image: string };
}

export const requestId = fc.stringMatching(/^[A-Za-z0-9._:-]{1,64}$/);
export const priority = fc.constantFrom(...PRIORITIES);

const text = fc.oneof(fc.string({ maxLength: 200 }), fc.string({ unit: 'grapheme', maxLength: 100 }), fc.lorem({ maxCount: 30 }));

const message = fc.record({ role: fc.constantFrom('system', 'user', 'assistant'), content: text });

/** A request the bridge should answer `ok`. */
export const validChat = fc.record({
  id: requestId,
  messages: fc.array(message, { minLength: 1, maxLength: 4 }).map((m) => [...m, { role: 'user', content: 'and now?' }]),
  max_tokens: fc.integer({ min: 1, max: 64 }),
});

export const validEmbeddings = fc.record({
  id: requestId,
  input: fc.oneof(
    text.filter((s) => s !== ''),
    fc.array(fc.constant('x'), { minLength: 1, maxLength: 50 }),
  ),
});

/** Strings a header, a log line or a Redis member may choke on. */
export const nastyString = fc.oneof(
  fc.constantFrom(
    'ライン-3',
    'a\r\nX-Injected: 1',
    'line\n',
    'tab\there',
    'é',
    '\u0000',
    '\u2028',
    '\ud800',
    'x'.repeat(128),
    '../../etc',
    '%0d%0a',
    '{{part}}',
    '*',
  ),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 128 }),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 64 }),
);

/** Token counts from ordinary to absurd, and some that are not counts at all. */
export const hugeCount = fc.oneof(
  fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  fc.constantFrom(1024, 1025, 16_384, 16_385, 1e6, 1e9, 1e14, 1e15, 2 ** 53 - 1, 2 ** 53 + 2, 1e300, 0, -1, 1.5, Number.MAX_VALUE),
);

export const modelName = fc.oneof(
  fc.constant('sim-model'),
  fc.constantFrom('gpt-4o', 'gpt-4.1-mini', 'unpriced-model', 'o1', 'text-embedding-3-small'),
  fc.string({ minLength: 1, maxLength: 256 }),
  nastyString,
);

/** A valid chat request with one to three fields set to what a hostile device would send. */
export const hostileFields = fc
  .tuple(
    validChat,
    fc.record(
      {
        lock: nastyString,
        max_tokens: hugeCount,
        max_completion_tokens: hugeCount,
        n: fc.integer({ min: -1, max: 10 }),
        model: modelName,
        ttl_ms: fc.oneof(fc.integer({ min: 1, max: 100 }), fc.constantFrom(2 ** 31, 1e15)),
        stream: fc.boolean(),
        cache: fc.boolean(),
        user: nastyString,
        stop: fc.array(nastyString, { maxLength: 5 }),
        seed: fc.oneof(fc.integer(), fc.constant(2 ** 60)),
        logit_bias: fc.dictionary(fc.stringMatching(/^\d{1,6}$/), fc.double({ min: -100, max: 100, noNaN: true }), { maxKeys: 300 }),
      },
      { requiredKeys: [] },
    ),
  )
  .map(([request, fields]) => ({ ...request, ...fields }));

/** Any JSON value, set in place of one field of a valid request, or added as an unknown one. */
export const mutatedRequest = fc
  .tuple(
    fc.oneof(validChat, validEmbeddings),
    fc.oneof(
      fc.constantFrom(
        'id',
        'messages',
        'input',
        'model',
        'lock',
        'max_tokens',
        'n',
        'tools',
        'response_format',
        'template',
        'vars',
        'stream',
        '__proto__',
        'constructor',
      ),
      fc.string(),
    ),
    fc.jsonValue({ maxDepth: 4 }),
    fc.boolean(),
  )
  .map(([request, field, value, remove]) => {
    const copy: Record<string, unknown> = { ...request };
    if (remove) delete copy[field];
    else Object.defineProperty(copy, field, { value, enumerable: true, writable: true, configurable: true });
    return copy;
  });

/** `depth` nested arrays or objects: parsers and validators that recurse meet their stack here. */
export function deepJson(depth: number, objects: boolean): string {
  return objects ? `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}` : `${'['.repeat(depth)}1${']'.repeat(depth)}`;
}

/** Deep or large JSON: nesting to 100 000, strings and arrays near and over the payload limit. */
export function bigJson(ctx: InputContext): fc.Arbitrary<string> {
  const near = fc.integer({ min: Math.floor(ctx.maxPayloadBytes * 0.9), max: Math.floor(ctx.maxPayloadBytes * 1.1) });
  return fc.oneof(
    fc.tuple(fc.integer({ min: 10, max: 100_000 }), fc.boolean()).map(([depth, objects]) => deepJson(depth, objects)),
    fc
      .tuple(fc.integer({ min: 10, max: 100_000 }), fc.boolean())
      .map(([depth, objects]) => `{"id":"deep","messages":[{"role":"user","content":${deepJson(depth, objects)}}]}`),
    near.map((size) => JSON.stringify({ id: 'big', messages: [{ role: 'user', content: 'x'.repeat(size) }] })),
    near.map((size) => JSON.stringify({ id: 'many', messages: Array.from({ length: Math.floor(size / 40) }, () => ({ role: 'user', content: 'hi' })) })),
    near.map((size) => `{"id":"keys",${Array.from({ length: Math.floor(size / 12) }, (_, i) => `"k${i}":1`).join(',')}}`),
    fc.integer({ min: 1, max: 5000 }).map((n) =>
      JSON.stringify({
        id: 'tools',
        messages: [{ role: 'user', content: 'x' }],
        tools: Array.from({ length: n }, (_, i) => ({ type: 'function', function: { name: `f${i}`, parameters: { type: 'object' } } })),
      }),
    ),
  );
}
