// Typed answers: a template's `output` (or a chat request's own json_schema) is what the model
// is asked for and what its answer is checked against; a valid answer carries `data`, one that
// breaks the schema is asked again and then refused `invalid_output`, kept in the dead letters.
// Asserted on what the device got, what the upstream received and what the store booked.
import { writeFileSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../bridge/config/config.js';
import { budgetReport } from '../../bridge/ops/budgets-report.js';
import type { Reply } from '../../contract/index.js';
import { startUpstreamSim, type UpstreamSim } from '../../upstream-sim/sim.js';
import { ask, BROKER_MODES, okOf, startHarness, type Harness } from '../helpers/harness.js';
import { connectRedis, deletePrefix, REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { tempDir } from '../helpers/security.js';
import { readUntil } from '../helpers/wait.js';

const dir = tempDir('eab-typed-');
afterAll(() => dir.remove());

const DEFECT = {
  messages: [
    { role: 'system', content: 'You inspect machined parts.' },
    { role: 'user', content: 'Part {{part}}: burr height {{mm}} mm. {{note}}' },
  ],
  max_tokens: 64,
  output: {
    type: 'object',
    properties: {
      burr_mm: { type: 'number', minimum: 0, maximum: 5 },
      reject: { type: 'boolean' },
      note: { type: 'string', maxLength: 12 },
    },
    required: ['burr_mm', 'reject'],
  },
};

function configFile(name: string, content: Record<string, unknown>): string {
  const path = `${dir.path}/${name}.json`;
  writeFileSync(path, JSON.stringify(content));
  return path;
}

/** `read()` once it is defined (it follows the reply by a store step), or undefined after 5 s. */
function polled<T>(read: () => Promise<T | undefined>): Promise<T | undefined> {
  return readUntil(read, (value) => value !== undefined, 5000, 20);
}

/** The JSON body of the upstream's `i`th request. */
const bodyOf = (harness: Harness, i: number) => harness.upstream.requests[i]?.body as Record<string, unknown>;

const errorOf = (reply: Reply | undefined) => {
  if (reply === undefined || reply.ok) throw new Error(`expected an error reply, got ${JSON.stringify(reply)}`);
  return reply.error;
};

let h: Harness | undefined;
let sim: UpstreamSim | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
  await sim?.close();
  sim = undefined;
});

describe.each(BROKER_MODES)('typed answers (%s broker)', (mode) => {
  it('asks for the output in strict mode and answers with the typed data, also from the cache', async () => {
    h = await startHarness({ CONFIG_FILE: configFile(`strict-${mode}`, { templates: { defect: DEFECT } }) }, {}, undefined, { mode });
    const d = await h.device('cam-1');
    const request = { id: 't1', template: 'defect', vars: { part: 'A7', mm: 0.31, note: 'check' } };
    await d.publish('high', request);
    const reply = okOf((await d.reply('t1'))[0]);
    expect(reply.data).toEqual({ burr_mm: 2.5, reject: true, note: 'sim answer t' });
    expect(JSON.parse(reply.content ?? '')).toEqual(reply.data);
    expect(bodyOf(h, 0)['response_format']).toEqual({
      type: 'json_schema',
      json_schema: {
        name: 'defect',
        strict: true,
        schema: {
          type: 'object',
          properties: {
            burr_mm: { type: 'number', minimum: 0, maximum: 5 },
            reject: { type: 'boolean' },
            note: { type: ['string', 'null'], description: '(at most 12 characters)' },
          },
          required: ['burr_mm', 'reject', 'note'],
          additionalProperties: false,
        },
      },
    });
    // The same request again: from the cache, with its data.
    await d.publish('high', { ...request, id: 't2' });
    expect(okOf((await d.reply('t2'))[0])).toMatchObject({ cached: true, data: reply.data });
    expect(h.upstream.requests).toHaveLength(1);
  });

  it('asks a provider without structured outputs for a JSON object, with the schema in a system message', async () => {
    sim = await startUpstreamSim({ port: 0, latencyMs: 5 });
    const file = { templates: { defect: DEFECT }, providers: [{ name: 'plain', url: sim.url, structuredOutputs: false }], chain: ['plain'] };
    h = await startHarness({ CONFIG_FILE: configFile(`plain-${mode}`, file) }, {}, undefined, { mode, upstream: sim });
    const d = await h.device('cam-2');
    await d.publish('normal', { id: 'p1', template: 'defect', vars: { part: 'B2', mm: 1, note: '' } });
    const reply = okOf((await d.reply('p1'))[0]);
    expect(reply.data).toMatchObject({ burr_mm: 2.5, reject: true });
    const body = sim.requests[0]?.body as { response_format: unknown; messages: Array<{ role: string; content: string }> };
    expect(body.response_format).toEqual({ type: 'json_object' });
    expect(body.messages[0]?.role).toBe('system');
    expect(body.messages[0]?.content).toContain('JSON Schema: {"type":"object"');
    expect(body.messages[1]).toEqual({ role: 'system', content: 'You inspect machined parts.' });
  });

  it('asks again once, then refuses invalid_output naming the field, the raw answer kept in the dead letter', async () => {
    h = await startHarness({ CONFIG_FILE: configFile(`off-${mode}`, { templates: { defect: DEFECT } }) }, {}, undefined, { mode });
    const d = await h.device('cam-3');
    await d.publish('normal', { id: 'o1', template: 'defect', vars: { part: 'C3', mm: 9, note: 'sim:off-schema=2' } });
    const error = errorOf((await d.reply('o1'))[0]);
    expect(error.code).toBe('invalid_output');
    expect(error.message).toContain('field "burr_mm": 7.2 is above maximum 5');
    expect(error.raw).toBeUndefined(); // the model's text is the operator's, in the dead letter
    expect(h.upstream.requests).toHaveLength(2);
    // The retry carries the answer and what was wrong with it.
    const retry = bodyOf(h, 1)['messages'] as Array<{ role: string; content: string }>;
    expect(retry.at(-2)).toMatchObject({ role: 'assistant', content: expect.stringContaining('"burr_mm":7.2') });
    expect(retry.at(-1)?.content).toContain('field "burr_mm": 7.2 is above maximum 5');
    // Dead-lettered as the job completes, just after the reply went out.
    const store = h.bridge.store;
    const letter = await polled(() => store.operations.deadLetters.get('cam-3/o1', Date.now()));
    expect(letter?.reply).toMatchObject({ ok: false, error: { code: 'invalid_output', raw: expect.stringContaining('"burr_mm":7.2') } });
  });

  it('answers with the data when the second answer is valid, every call counted', async () => {
    h = await startHarness({ CONFIG_FILE: configFile(`once-${mode}`, { templates: { defect: DEFECT } }) }, {}, undefined, { mode });
    const d = await h.device('cam-4');
    await d.publish('normal', { id: 'v1', template: 'defect', vars: { part: 'D4', mm: 1, note: 'sim:off-schema=1' } });
    const reply = okOf((await d.reply('v1'))[0]);
    expect(reply.data).toMatchObject({ burr_mm: 2.5, reject: true });
    expect(reply.attempts).toBe(2);
    expect(h.upstream.requests).toHaveLength(2);
    const store = h.bridge.store;
    const booked = await polled(async () => {
      const byTemplate = (await store.operations.usage(Date.now() - 60_000, Date.now() + 60_000)).byTemplate['defect'];
      return byTemplate?.requests === 2 ? byTemplate : undefined;
    });
    expect(booked?.requests).toBe(2);
    expect(reply.usage?.prompt_tokens).toBe(booked?.promptTokens);
    expect(reply.usage?.completion_tokens).toBe(booked?.completionTokens);
  });

  it('checks a chat request against its own json_schema and answers with data', async () => {
    h = await startHarness({}, {}, undefined, { mode });
    const d = await h.device('cam-5');
    const schema = {
      type: 'object',
      properties: { verdict: { type: 'string', enum: ['ok', 'reject'] }, parts: { type: 'array', items: { type: 'integer', minimum: 1 } } },
      required: ['verdict', 'parts'],
      additionalProperties: false,
    };
    const format = { type: 'json_schema', json_schema: { name: 'verdict', strict: true, schema } };
    await d.publish('normal', ask('c1', 'Verdict?', { response_format: format }));
    expect(okOf((await d.reply('c1'))[0]).data).toEqual({ verdict: 'ok', parts: [1] });
    // Outside the safe subset (a pattern): passed on as before, no data.
    const patterned = { ...format, json_schema: { ...format.json_schema, schema: { ...schema, properties: { verdict: { type: 'string', pattern: '^o' } } } } };
    await d.publish('normal', ask('c2', 'Verdict?', { response_format: patterned }));
    const plain = okOf((await d.reply('c2'))[0]);
    expect(plain.data).toBeUndefined();
    expect(bodyOf(h, 1)['response_format']).toEqual(patterned);
  });
});

describe('typed answers on Redis', () => {
  const redis = connectRedis();
  const prefix = uniquePrefix('typed');
  afterAll(async () => {
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  it('settles budgets and the token window with every call, and dead-letters invalid_output with its raw answer', async () => {
    const limits = [{ name: 'fleet', per: 'fleet', period: 'day', tokens: 1_000_000 }];
    const path = configFile('redis', { templates: { defect: DEFECT }, budgets: { limits } });
    const env = { CONFIG_FILE: path, REDIS_URL, REDIS_PREFIX: prefix, RATE_LIMIT_TPM: '100000' };
    h = await startHarness(env);
    const d = await h.device('cam-6');
    await d.publish('normal', { id: 'r1', template: 'defect', vars: { part: 'E5', mm: 1, note: 'sim:off-schema=1' } });
    const reply = okOf((await d.reply('r1'))[0]);
    expect(reply).toMatchObject({ attempts: 2, data: { burr_mm: 2.5, reject: true } });
    const used = (reply.usage?.prompt_tokens ?? 0) + (reply.usage?.completion_tokens ?? 0);
    const { budgets } = loadConfig({ ...env, MQTT_PORT: '0', HTTP_PORT: '0' }).file;
    const store = h.bridge.store;
    const fleet = await polled(async () => {
      const [use] = (await budgetReport(budgets, store.operations, Date.now())).budgets[0]?.use ?? [];
      return use?.reserved === 0 ? use : undefined;
    });
    expect(fleet).toEqual({ subject: '*', used, reserved: 0 });

    await d.publish('normal', { id: 'r2', template: 'defect', vars: { part: 'E6', mm: 9, note: 'sim:off-schema=2' } });
    expect(errorOf((await d.reply('r2'))[0]).code).toBe('invalid_output');
    const letter = await polled(() => store.operations.deadLetters.get('cam-6/r2', Date.now()));
    expect(letter?.reply).toMatchObject({ error: { code: 'invalid_output', raw: expect.stringContaining('"burr_mm":7.2') } });
  });
});
