// The request as OpenAI defines it, nothing dropped: unknown fields refused by name, tools and
// the other chat parameters passed through, and what the model returned (tool calls, every
// choice, JSON mode) in the reply. Asserted on what the device got and the upstream saw.
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_TOOLS, type Reply } from '../../contract/index.js';
import { ask, okOf, startHarness, type Harness } from '../helpers/harness.js';

const LOOKUP = {
  type: 'function',
  function: { name: 'lookup_part', description: 'Finds a part', parameters: { type: 'object', properties: { question: { type: 'string' } } } },
};

const errorOf = (reply: Reply | undefined) => {
  if (reply === undefined || reply.ok) throw new Error(`expected an error reply, got ${JSON.stringify(reply)}`);
  return reply.error;
};

describe('OpenAI chat requests, whole', () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it('refuses a field it does not know, by name, without calling the upstream', async () => {
    h = await startHarness();
    const d = await h.device('cam-1');
    await d.publish('normal', ask('typo', 'hello', { max_token: 50 }));
    expect(errorOf((await d.reply('typo'))[0])).toMatchObject({ code: 'invalid_request', message: 'unknown field "max_token"' });
    await d.publish('normal', { id: 'emb', input: 'x', tools: [LOOKUP] });
    expect(errorOf((await d.reply('emb'))[0])).toMatchObject({ code: 'invalid_request', message: 'unknown field "tools"' });
    const tooMany = Array.from({ length: MAX_TOOLS + 1 }, (_, i) => ({ type: 'function', function: { name: `t${i}` } }));
    await d.publish('normal', ask('many', 'hello', { tools: tooMany }));
    expect(errorOf((await d.reply('many'))[0])).toMatchObject({ code: 'invalid_request', message: `tools: must hold at most ${MAX_TOOLS} tools` });
    expect(h.upstream.requests).toHaveLength(0);
  });

  it('carries a tool call round trip: the call in the reply, the tool result back, the final answer', async () => {
    h = await startHarness();
    const d = await h.device('cam-2');
    const question = { role: 'user', content: 'Which bin holds part A7?' };
    await d.publish('high', { id: 't1', messages: [question], tools: [LOOKUP], tool_choice: 'auto', parallel_tool_calls: false });
    const call = okOf((await d.reply('t1'))[0]);
    expect(call).toMatchObject({ finish_reason: 'tool_calls', content: null });
    expect(call.tool_calls).toEqual([
      { id: 'call_sim_0', type: 'function', function: { name: 'lookup_part', arguments: JSON.stringify({ question: 'Which bin holds part A7?' }) } },
    ]);
    expect(h.upstream.requests[0]?.body).toMatchObject({ tools: [LOOKUP], tool_choice: 'auto', parallel_tool_calls: false });

    const messages = [
      question,
      { role: 'assistant', content: null, tool_calls: call.tool_calls },
      { role: 'tool', tool_call_id: 'call_sim_0', content: 'bin 42' },
    ];
    await d.publish('high', { id: 't2', messages, tools: [LOOKUP] });
    expect(okOf((await d.reply('t2'))[0])).toMatchObject({ finish_reason: 'stop', content: 'sim answer to: tool result: bin 42' });
    expect(h.upstream.requests[1]?.body).toMatchObject({ messages });
  });

  it('passes JSON mode, n and the sampling parameters through, and returns every choice', async () => {
    h = await startHarness();
    const d = await h.device('cam-3');
    await d.publish('normal', ask('json', 'Status?', { response_format: { type: 'json_object' }, seed: 7, max_completion_tokens: 64 }));
    expect(JSON.parse(okOf((await d.reply('json'))[0]).content ?? '')).toEqual({ answer: 'sim answer to: Status?' });
    const extra = { n: 2, frequency_penalty: 0.5, presence_penalty: -0.5, logit_bias: { '50256': -100 }, logprobs: true, top_logprobs: 2, user: 'line-3' };
    await d.publish('normal', ask('two', 'Name a colour.', extra));
    const two = okOf((await d.reply('two'))[0]);
    expect(two.content).toBe('sim answer to: Name a colour.');
    expect(two.choices?.map((c) => [c.index, c.content])).toEqual([
      [0, 'sim answer to: Name a colour.'],
      [1, 'sim answer 2 to: Name a colour.'],
    ]);
    expect(two.logprobs).toMatchObject({ content: [{ token: 'sim' }] });
    expect(h.upstream.requests[1]?.body).toMatchObject(extra);
    const format = {
      type: 'json_schema',
      json_schema: { name: 'verdict', strict: true, schema: { type: 'object', properties: { answer: { type: 'string' } } } },
    };
    await d.publish('normal', ask('schema', 'Verdict?', { response_format: format }));
    expect(JSON.parse(okOf((await d.reply('schema'))[0]).content ?? '')).toEqual({ answer: 'sim answer to: Verdict?' });
    expect(h.upstream.requests[2]?.body).toMatchObject({ response_format: format });
  });

  it('never answers a request from the cache of one that differs in a parameter that changes the answer', async () => {
    h = await startHarness();
    const d = await h.device('cam-4');
    const q = 'Is the seal intact?';
    const variants: Record<string, Record<string, unknown>> = {
      plain: {},
      tools: { tools: [LOOKUP] },
      none: { tools: [LOOKUP], tool_choice: 'none' },
      json: { response_format: { type: 'json_object' } },
      schema: { response_format: { type: 'json_schema', json_schema: { name: 'v', schema: { type: 'object' } } } },
      n: { n: 2 },
      penalty: { presence_penalty: 1 },
      bias: { logit_bias: { '1': 5 } },
      logprobs: { logprobs: true },
      completion: { max_completion_tokens: 9 },
    };
    for (const [id, extra] of Object.entries(variants)) {
      await d.publish('normal', ask(id, q, extra));
      expect(okOf((await d.reply(id))[0]).cached).toBe(false);
    }
    await d.publish('normal', ask('again', q, { tools: [LOOKUP] }));
    expect(okOf((await d.reply('again'))[0])).toMatchObject({
      cached: true,
      finish_reason: 'tool_calls',
      tool_calls: [expect.objectContaining({ id: 'call_sim_0' })],
    });
    expect(h.upstream.requests).toHaveLength(Object.keys(variants).length);
  });
});
