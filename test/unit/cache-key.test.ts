import { describe, expect, it } from 'vitest';
import { InferRequestSchema, type InferRequest } from '../../contract/index.js';
import { cacheKeyOf } from '../../bridge/intake/cache-key.js';

const policy = { ttlS: 300, allowTemperature: false, defaultModel: 'gpt-4o-mini', defaultEmbeddingModel: 'text-embedding-3-small' };
const route = '{"provider":"primary"}';
const key = (body: unknown): string | undefined => cacheKeyOf(InferRequestSchema.parse(body) as InferRequest, policy, route);

describe('cacheKeyOf', () => {
  // Keys as v0.6.1 computed them: a new build must find the answers an older one cached (Redis).
  it.each([
    [
      {
        id: 'a',
        messages: [
          { role: 'system', content: 'You inspect welds.' },
          { role: 'user', content: 'Seam 4, "bead" 4.1 mm? ünï 😀' },
        ],
        max_tokens: 16,
      },
      'c1dce574eab5b51e7a3bd9290205745df13ceafa354f3b7ea9f1aa1738ace79e',
    ],
    [
      {
        id: 'b',
        messages: [
          {
            2: 2,
            10: 1,
            role: 'user',
            content: [
              { type: 'text', text: 'hi' },
              { type: 'image_url', image_url: { url: 'data:x', detail: 'low' } },
            ],
            name: 'cam',
          },
        ],
        stop: ['\n'],
        seed: 3,
        response_format: { type: 'json_object' },
      },
      '2116c70d0bb6375345ef36563b8012f2c416a790aa6807b306dba80d8fb8bd98',
    ],
    [{ id: 'c', input: ['one', 'two'], dimensions: 8 }, '23d0ecd93310f0f457cfbb274c344bdba7b74fd5889f19577fa82d08f1c39617'],
  ])('keys %j as before', (body, expected) => {
    expect(key(body)).toBe(expected);
  });

  it('does not depend on the order of keys, at any depth', () => {
    const a = key({ id: 'x', max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'text', text: 't' }], name: 'n' }] });
    const b = key({ messages: [{ name: 'n', content: [{ text: 't', type: 'text' }], role: 'user' }], id: 'y', max_tokens: 5 });
    expect(a).toBe(b);
  });
});
