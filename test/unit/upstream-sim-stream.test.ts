// The upstream simulator's streaming answers: OpenAI's server-sent events, whose deltas add up
// to exactly the answer a non-streaming call gets, and scripted breaks in the middle.
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startUpstreamSim, type UpstreamSim } from '../../upstream-sim/sim.js';

const sims: UpstreamSim[] = [];
afterEach(async () => {
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

async function start(): Promise<UpstreamSim> {
  const sim = await startUpstreamSim({ port: 0, latencyMs: 0, streamChunkMs: 1 });
  sims.push(sim);
  return sim;
}

const chat = (sim: UpstreamSim, body: Record<string, unknown>) =>
  request(`${sim.url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

/** The `data:` payloads of a stream, in order; what the body held when it broke off, too. */
async function events(sim: UpstreamSim, body: Record<string, unknown>): Promise<{ data: string[]; complete: boolean; type: unknown }> {
  const res = await chat(sim, body);
  let text = '';
  let complete = true;
  try {
    for await (const chunk of res.body) text += (chunk as Buffer).toString();
  } catch {
    complete = false; // what arrived before the break is kept
  }
  const data = text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
  return { data, complete, type: res.headers['content-type'] };
}

const content = (data: string[]): string =>
  data
    .filter((d) => d !== '[DONE]')
    .map((d) => (JSON.parse(d) as { choices: Array<{ delta: { content?: string } }> }).choices[0]?.delta.content ?? '')
    .join('');

describe('upstream-sim streaming', () => {
  it('streams chunks that add up to the non-streaming answer, then the usage, then [DONE]', async () => {
    const sim = await start();
    const question = { messages: [{ role: 'user', content: 'Describe the weld seam in some detail, please.' }] };
    const whole = (await (await chat(sim, question)).body.json()) as { choices: Array<{ message: { content: string } }>; usage: unknown };
    const { data, type } = await events(sim, { ...question, stream: true, stream_options: { include_usage: true } });
    expect(type).toBe('text/event-stream');
    expect(data.at(-1)).toBe('[DONE]');
    expect(data.length).toBeGreaterThan(4);
    expect(content(data)).toBe(whole.choices[0]?.message.content);
    const last = JSON.parse(data.at(-2) as string) as { choices: unknown[]; usage: unknown };
    expect(last).toMatchObject({ choices: [], usage: whole.usage });
    const finish = JSON.parse(data.at(-3) as string) as { choices: Array<{ finish_reason: string }> };
    expect(finish.choices[0]?.finish_reason).toBe('stop');
  });

  it('streams a tool call as deltas whose arguments add up to the whole call', async () => {
    const sim = await start();
    const tools = [{ type: 'function', function: { name: 'lookup_part' } }];
    const body = { messages: [{ role: 'user', content: 'Where is part A7 kept?' }], tools };
    const whole = (await (await chat(sim, body)).body.json()) as { choices: Array<{ message: { tool_calls: Array<{ function: { arguments: string } }> } }> };
    const { data } = await events(sim, { ...body, stream: true });
    const deltas = data
      .filter((d) => d !== '[DONE]')
      .flatMap(
        (d) =>
          (JSON.parse(d) as { choices: Array<{ delta: { tool_calls?: Array<{ function: { name?: string; arguments: string } }> } }> }).choices[0]?.delta
            .tool_calls ?? [],
      );
    expect(deltas[0]?.function.name).toBe('lookup_part');
    expect(deltas.map((d) => d.function.arguments).join('')).toBe(whole.choices[0]?.message.tool_calls[0]?.function.arguments);
  });

  it('breaks a stream off after N chunks as scripted: a dropped connection, a malformed event, a hang', async () => {
    const sim = await start();
    const body = { messages: [{ role: 'user', content: 'A long enough question to make many chunks.' }], stream: true };
    sim.script({ streamBreak: { after: 3, then: 'drop' } });
    const dropped = await events(sim, body);
    expect(dropped.complete).toBe(false);
    expect(dropped.data).toHaveLength(3);

    sim.script({ streamBreak: { after: 2, then: 'malformed' } });
    const malformed = await events(sim, body);
    expect(malformed.data).toHaveLength(3);
    expect(() => JSON.parse(malformed.data[2] as string)).toThrow();

    sim.script({ streamBreak: { after: 1, then: 'hang' } });
    const res = await chat(sim, body);
    const reader = res.body[Symbol.asyncIterator]();
    const first = await reader.next();
    expect(String(first.value).startsWith('data: ')).toBe(true);
    const next = await Promise.race([reader.next().then(() => 'more'), new Promise((r) => setTimeout(() => r('hanging'), 300))]);
    expect(next).toBe('hanging');
    res.body.destroy();
  });
});
