// Typed answers, unit by unit: a template's output compiled at load (a schema the compiler
// refuses stops the start naming template and path), the words a violation is reported in,
// and the safe subset a device's own schema must keep to before it is compiled.
import { writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfigFile } from '../../bridge/config/config-file.js';
import { outputJsonSchema, OutputSchema } from '../../bridge/config/output.js';
import { OutputChecks, RAW_KEPT_CHARS, safeSchema } from '../../bridge/upstream/output-check.js';
import type { ChatRequest } from '../../contract/index.js';
import { tempDir } from '../helpers/security.js';

const dir = tempDir('eab-output-');
afterAll(() => dir.remove());

const OUTPUT = {
  type: 'object',
  properties: {
    burr_mm: { type: 'number', minimum: 0, maximum: 5 },
    reject: { type: 'boolean' },
    grade: { type: 'string', enum: ['A', 'B'] },
    note: { type: 'string', maxLength: 8 },
    count: { type: 'integer' },
  },
  required: ['burr_mm', 'reject', 'grade', 'count'],
} as const;
const TEMPLATE = { messages: [{ role: 'user', content: 'Part {{part}}' }], output: OUTPUT };

function fileWith(name: string, templates: Record<string, unknown>): string {
  const path = `${dir.path}/${name}.json`;
  writeFileSync(path, JSON.stringify({ templates }));
  return path;
}

describe('template output at load', () => {
  it('compiles a good output', () => {
    expect(parseConfigFile(fileWith('good', { defect: TEMPLATE })).problems).toEqual([]);
  });

  it('stops the start naming the template and the path when the compiler refuses the schema', () => {
    const bad = { ...TEMPLATE, output: { ...OUTPUT, $schema: 'http://json-schema.org/draft-07/schema#' } };
    const path = fileWith('bad', { defect: TEMPLATE, old: bad });
    const { file, problems } = parseConfigFile(path);
    expect(file).toBeUndefined();
    expect(problems).toHaveLength(1);
    expect(problems[0]?.variable).toBe('CONFIG_FILE');
    expect(problems[0]?.problem).toMatch(new RegExp(`^${path}:1:\\d+: templates\\.old\\.output: the JSON Schema compiler refuses it: .*draft-07`));
  });

  it('refuses output together with response_format', () => {
    const { problems } = parseConfigFile(fileWith('both', { defect: { ...TEMPLATE, response_format: { type: 'json_object' } } }));
    expect(problems.map((p) => p.problem)).toEqual([expect.stringContaining('templates.defect.response_format: give output or response_format, not both')]);
  });

  it('asks for every property, optional ones nullable, strings bounded', () => {
    const schema = outputJsonSchema(OutputSchema.parse(OUTPUT));
    expect(schema['required']).toEqual(['burr_mm', 'reject', 'grade', 'note', 'count']);
    expect(schema['additionalProperties']).toBe(false);
    expect((schema['properties'] as Record<string, unknown>)['note']).toEqual({ type: ['string', 'null'], maxLength: 8 });
    expect((schema['properties'] as Record<string, unknown>)['grade']).toEqual({ type: 'string', enum: ['A', 'B'], maxLength: 1024 });
  });
});

describe('answer check and its violation', () => {
  const checks = new OutputChecks();
  const schema = outputJsonSchema(OutputSchema.parse(OUTPUT));
  checks.registerTemplate(schema, { name: 'defect', schema, instruction: '' });
  const request: ChatRequest = {
    id: 'r',
    messages: [{ role: 'user', content: 'x' }],
    response_format: { type: 'json_schema', json_schema: { name: 'defect', schema } },
  };
  const check = checks.forRequest(request);
  const good = { burr_mm: 0.31, reject: true, grade: 'A', note: null, count: 2 };
  const violation = (answer: unknown): string => {
    const verdict = check?.check(typeof answer === 'string' ? answer : JSON.stringify(answer));
    return verdict && !verdict.ok ? verdict.violation : 'valid';
  };

  it('gives a valid answer as data, a null optional field dropped', () => {
    expect(check?.check(JSON.stringify(good))).toEqual({ ok: true, data: { burr_mm: 0.31, reject: true, grade: 'A', count: 2 } });
    expect(check?.check('```json\n{"burr_mm":1,"reject":false,"grade":"B","note":"ok","count":0}\n```')).toMatchObject({ ok: true });
  });

  it('names the first violation', () => {
    expect(violation({ ...good, burr_mm: 7.2 })).toBe('field "burr_mm": 7.2 is above maximum 5');
    expect(violation({ ...good, burr_mm: -1 })).toBe('field "burr_mm": -1 is below minimum 0');
    const { reject: _, ...missing } = good;
    expect(violation(missing)).toBe('field "reject" is missing');
    expect(violation({ ...good, reject: 'yes' })).toBe('field "reject": "yes" is not of type boolean');
    expect(violation({ ...good, count: 1.5 })).toBe('field "count": 1.5 is not of type integer');
    expect(violation({ ...good, grade: 'C' })).toBe('field "grade": "C" is not one of "A", "B"');
    expect(violation({ ...good, note: 'far too long' })).toBe('field "note" is longer than 8 characters');
    expect(violation({ ...good, extra: 1 })).toBe('field "extra" is not declared');
    expect(violation('not json')).toBe('the answer is not JSON');
    expect(violation([1])).toBe('the answer is not a JSON object');
    expect(check?.check(null)).toMatchObject({ ok: false, violation: 'the answer has no text' });
  });

  it('keeps at most the first 4096 characters of an invalid answer', () => {
    const verdict = check?.check(`{"x": "${'y'.repeat(10_000)}"}`);
    expect(verdict?.ok).toBe(false);
    if (verdict && !verdict.ok) expect(verdict.raw).toHaveLength(RAW_KEPT_CHARS);
  });
});

describe("a device's own schema", () => {
  const object = (properties: Record<string, unknown>) => ({ type: 'object', properties, required: Object.keys(properties) });

  it('is compiled inside the safe subset: nested objects and arrays of scalars with bounds', () => {
    expect(
      safeSchema(
        object({ a: { type: 'string', maxLength: 4 }, b: { type: 'array', items: object({ c: { type: ['integer', 'null'], minimum: 0 } }), maxItems: 3 } }),
      ),
    ).toBe(true);
    expect(safeSchema(object({ e: { type: 'string', enum: ['x', null] } }))).toBe(true);
  });

  it('is left to the upstream outside it', () => {
    expect(safeSchema(object({ a: { type: 'string', pattern: '^a+$' } }))).toBe(false);
    expect(safeSchema(object({ a: { type: 'string', format: 'email' } }))).toBe(false);
    expect(safeSchema(object({ a: { $ref: '#/$defs/x' } }))).toBe(false);
    expect(safeSchema(object({ a: { anyOf: [{ type: 'string' }] } }))).toBe(false);
    expect(safeSchema({ type: 'array', items: { type: 'string' } })).toBe(false);
    expect(safeSchema(object({ a: { type: 'object', additionalProperties: { type: 'string' } } }))).toBe(false);
    let deep: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < 5; i++) deep = object({ a: deep });
    expect(safeSchema(deep)).toBe(false);
    const wide = object(Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`f${i}`, { type: 'number' }])));
    expect(safeSchema(wide)).toBe(false);
  });

  it('is compiled once and kept in a cache bounded in entries', () => {
    const checks = new OutputChecks(4);
    const ask = (i: number): ChatRequest => ({
      id: `r${i}`,
      messages: [{ role: 'user', content: 'x' }],
      response_format: { type: 'json_schema', json_schema: { name: 's', schema: object({ [`f${i}`]: { type: 'number' } }) } },
    });
    const first = checks.forRequest(ask(0));
    expect(first).toBeDefined();
    expect(checks.forRequest(ask(0))).toBe(first);
    for (let i = 1; i < 10; i++) checks.forRequest(ask(i));
    expect(checks.deviceEntries).toBe(4);
    const patterned = {
      ...ask(99),
      response_format: { type: 'json_schema' as const, json_schema: { name: 's', schema: object({ a: { type: 'string', pattern: 'a' } }) } },
    };
    expect(checks.forRequest(patterned)).toBeUndefined();
  });
});
