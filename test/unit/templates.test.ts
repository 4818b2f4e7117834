// Rendering templates: vars inserted as plain text, once (a value holding {{x}} stays as it
// is), in string contents and text parts; names checked both ways; and a bad template in
// CONFIG_FILE named with its path.
import { writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfigFile } from '../../bridge/config/config-file.js';
import { Templates } from '../../bridge/intake/templates.js';
import { BridgeError } from '../../contract/index.js';
import { tempDir } from '../helpers/security.js';

const dir = tempDir('eab-templates-unit-');
afterAll(() => dir.remove());

const templates = new Templates({
  t: {
    messages: [
      { role: 'system', content: 'Line {{line}}' },
      {
        role: 'user',
        content: [
          { type: 'text', text: '{{q}} ({{ line }})' },
          { type: 'image_url', image_url: { url: 'https://x/{{q}}' } },
        ],
      },
    ],
    model: 'm-default',
    priority_route: { critical: 'm-fast' },
  },
});
const render = (vars: Record<string, string | number>, extra: Record<string, unknown> = {}, priority: 'critical' | 'normal' = 'normal') =>
  templates.render({ id: 'r1', template: 't', vars, ...extra }, priority);

const refusal = (fn: () => unknown): string => {
  try {
    fn();
  } catch (err) {
    if (err instanceof BridgeError && err.code === 'invalid_request') return err.message;
    throw err;
  }
  throw new Error('expected a refusal');
};

describe('Templates.render', () => {
  it('inserts each var as text, once, in contents and text parts only', () => {
    const chat = render({ line: 3, q: 'Is {{line}} running?' });
    expect(chat.messages).toEqual([
      { role: 'system', content: 'Line 3' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Is {{line}} running? (3)' },
          { type: 'image_url', image_url: { url: 'https://x/{{q}}' } },
        ],
      },
    ]);
    expect(chat.model).toBe('m-default');
  });

  it('takes the model from the request, else the priority route, else the template; carries lock, ttl_ms, cache and stream', () => {
    expect(render({ line: 1, q: 'a' }, {}, 'critical').model).toBe('m-fast');
    expect(render({ line: 1, q: 'a' }, { model: 'mine' }, 'critical').model).toBe('mine');
    expect(render({ line: 1, q: 'a' }, { lock: 'l', ttl_ms: 5, cache: false, stream: true })).toMatchObject({
      lock: 'l',
      ttl_ms: 5,
      cache: false,
      stream: true,
    });
  });

  it('refuses by name: unknown template, missing var, unused var (names on the prototype are no vars)', () => {
    expect(refusal(() => templates.render({ id: 'r', template: 'nope', vars: {} }, 'normal'))).toBe('unknown template "nope"');
    expect(refusal(() => render({ line: 1 }))).toBe('missing var "q"');
    expect(refusal(() => render({ line: 1, q: 'a', extra: 'x' }))).toBe('unknown var "extra"');
    const proto = new Templates({ p: { messages: [{ role: 'user', content: '{{constructor}}' }] } });
    expect(refusal(() => proto.render({ id: 'r', template: 'p', vars: {} }, 'normal'))).toBe('missing var "constructor"');
  });

  it('replace() swaps the whole set at once', () => {
    const set = new Templates({ a: { messages: [{ role: 'user', content: 'a' }] } });
    set.replace({ b: { messages: [{ role: 'user', content: 'b' }] } });
    expect(set.names()).toEqual(['b']);
  });

  it('names a bad template in CONFIG_FILE by its path', () => {
    const path = `${dir.path}/bad.json`;
    writeFileSync(path, JSON.stringify({ templates: { ok: { messages: [] }, 'bad name': { messages: [{ role: 'user', content: 'x' }] } } }));
    const problems = parseConfigFile(path).problems.map((p) => p.problem);
    expect(problems).toContainEqual(expect.stringContaining('templates.ok.messages:'));
    expect(problems).toContainEqual(expect.stringContaining('templates.bad name: template names are'));
  });
});
