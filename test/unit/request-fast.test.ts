// plainChatRequest must read every request it accepts exactly as InferRequestSchema does, and
// accept nothing the schema refuses: checked on the common shapes and on random variations.
import { describe, expect, it } from 'vitest';
import { InferRequestSchema, plainChatRequest } from '../../contract/index.js';

/** A small deterministic generator, so a failure can be replayed. */
function random(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return s / 2147483648;
  };
}

const ODD_VALUES: unknown[] = [
  '',
  'x',
  'a'.repeat(65),
  'a'.repeat(257),
  'bad id!',
  0,
  -1,
  1.5,
  2.5,
  3,
  2 ** 53,
  -0,
  1e308,
  true,
  false,
  null,
  [],
  {},
  ['x'],
  [{ type: 'text', text: 't' }],
];
const FIELDS = [
  'id',
  'model',
  'lock',
  'ttl_ms',
  'cache',
  'messages',
  'max_tokens',
  'temperature',
  'top_p',
  'seed',
  'stop',
  'response_format',
  'user',
  'input',
  'dimensions',
  '__proto__',
];

function variation(next: () => number): unknown {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(next() * list.length)] as T;
  const message = (): Record<string, unknown> => {
    const m: Record<string, unknown> = next() < 0.5 ? { role: 'user', content: 'hi' } : { content: 'hi', role: 'system' };
    if (next() < 0.15) m[pick(['role', 'content', 'name', 'tool_call_id'])] = pick(ODD_VALUES);
    if (next() < 0.1) m['role'] = pick(['assistant', 'tool', 'developer', 'bot', 'User']);
    if (next() < 0.05) delete m['role'];
    return m;
  };
  const body: Record<string, unknown> = { id: `dev-${Math.floor(next() * 1000)}`, messages: [message(), ...(next() < 0.5 ? [message()] : [])] };
  if (next() < 0.5) body['max_tokens'] = pick([16, 1, 0, -3, 2.5, 2 ** 53, '16']);
  if (next() < 0.3) body['temperature'] = pick([0, 0.7, 2, 2.01, -0.1, NaN]);
  if (next() < 0.2) body['top_p'] = pick([0, 1, 0.5, 1.1]);
  if (next() < 0.2) body['seed'] = pick([0, -7, 1.5, 2 ** 53 - 1]);
  if (next() < 0.2) body['model'] = pick(['m', '', 'a'.repeat(256), 'a'.repeat(257), 3]);
  if (next() < 0.2) body['lock'] = pick(['l', '', 'a'.repeat(128), 'a'.repeat(129)]);
  if (next() < 0.2) body['ttl_ms'] = pick([1, 0, 1000.5, -5, 5000]);
  if (next() < 0.2) body['cache'] = pick([true, false, 'yes']);
  if (next() < 0.2) body[pick(FIELDS)] = pick(ODD_VALUES);
  if (next() < 0.05) body['messages'] = pick([[], 'x', [null], [[]]]);
  // Through JSON, as intake reads it (a __proto__ key becomes an own property).
  return JSON.parse(JSON.stringify(body).replace('"user":', '"__proto__":'));
}

describe('plainChatRequest', () => {
  it('reads the bench and device-sim requests as the schema does', () => {
    const body = JSON.parse(
      '{"id":"sim-1-2","messages":[{"role":"system","content":"You inspect welds."},{"role":"user","content":"Verdict?"}],"max_tokens":16,"ttl_ms":2000}',
    );
    const fast = plainChatRequest(body);
    expect(fast).toBeDefined();
    expect(JSON.stringify(fast)).toBe(JSON.stringify(InferRequestSchema.parse(body)));
  });

  it('accepts only what the schema accepts, and reads it the same, key order included', () => {
    const next = random(42);
    let fastPath = 0;
    for (let i = 0; i < 20_000; i += 1) {
      const body = variation(next);
      const fast = plainChatRequest(body);
      if (fast === undefined) continue;
      fastPath += 1;
      const parsed = InferRequestSchema.safeParse(body);
      expect(parsed.success, JSON.stringify(body)).toBe(true);
      expect(JSON.stringify(fast), JSON.stringify(body)).toBe(JSON.stringify(parsed.data));
      const data = parsed.data as { messages: object[] };
      expect(fast.messages.map((m) => Object.keys(m))).toEqual(data.messages.map((m) => Object.keys(m)));
    }
    expect(fastPath).toBeGreaterThan(2000);
  });

  it('leaves embeddings, content parts and unknown fields to the schema', () => {
    expect(plainChatRequest({ id: 'e', input: 'x' })).toBeUndefined();
    expect(plainChatRequest({ id: 'p', messages: [{ role: 'user', content: [{ type: 'text', text: 't' }] }] })).toBeUndefined();
    expect(plainChatRequest({ id: 'u', messages: [{ role: 'user', content: 'x' }], user: 'me' })).toBeUndefined();
  });
});
