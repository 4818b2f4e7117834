// Reading a streamed chat answer back into one completion: text handed on as it comes, every
// choice, tool-call pieces joined, logprobs, usage, and streams that end too early.
import { describe, expect, it } from 'vitest';
import { StreamedAnswer } from '../../bridge/upstream/stream-response.js';

const event = (choices: unknown[], extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', model: 'm-1', choices, ...extra });

describe('StreamedAnswer', () => {
  it("joins every choice, hands on the first choice's text only, and keeps the usage", () => {
    const seen: string[] = [];
    const answer = new StreamedAnswer((t) => seen.push(t));
    for (const data of [
      event([{ index: 0, delta: { role: 'assistant', content: '' } }]),
      event([{ index: 0, delta: { content: 'Hel' }, logprobs: { content: [{ token: 'Hel', logprob: -0.1 }] } }]),
      event([{ index: 1, delta: { content: 'Other' } }]),
      event([{ index: 0, delta: { content: 'lo' }, logprobs: { content: [{ token: 'lo', logprob: -0.2 }] } }]),
      event([
        { index: 0, delta: {}, finish_reason: 'stop' },
        { index: 1, delta: {}, finish_reason: 'length' },
      ]),
      event([], { usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } }),
      '[DONE]',
    ]) {
      expect(answer.add(data)).toBeUndefined();
    }
    expect(seen).toEqual(['Hel', 'lo']);
    expect(answer.completion('asked')).toEqual({
      model: 'm-1',
      content: 'Hello',
      finish_reason: 'stop',
      logprobs: {
        content: [
          { token: 'Hel', logprob: -0.1 },
          { token: 'lo', logprob: -0.2 },
        ],
      },
      choices: [
        {
          index: 0,
          content: 'Hello',
          finish_reason: 'stop',
          logprobs: {
            content: [
              { token: 'Hel', logprob: -0.1 },
              { token: 'lo', logprob: -0.2 },
            ],
          },
        },
        { index: 1, content: 'Other', finish_reason: 'length' },
      ],
      usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 },
    });
  });

  it('joins tool-call pieces into whole calls, content null', () => {
    const answer = new StreamedAnswer(() => undefined);
    answer.add(event([{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '' } }] } }]));
    answer.add(event([{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"q":' } }] } }]));
    answer.add(event([{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"A7"}' } }] } }]));
    answer.add(event([{ index: 0, delta: {}, finish_reason: 'tool_calls' }]));
    expect(answer.completion('asked')).toEqual({
      model: 'm-1',
      content: null,
      finish_reason: 'tool_calls',
      tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"q":"A7"}' } }],
    });
  });

  it('takes a stream without [DONE] only when every choice said why it ended', () => {
    const whole = new StreamedAnswer(() => undefined);
    whole.add(event([{ index: 0, delta: { content: 'ok' }, finish_reason: 'stop' }]));
    expect(whole.completion('asked')).toMatchObject({ content: 'ok', finish_reason: 'stop' });
    const cut = new StreamedAnswer(() => undefined);
    cut.add(event([{ index: 0, delta: { content: 'half' } }]));
    expect(cut.completion('asked')).toEqual({ malformed: 'stream ended before the answer did' });
    expect(new StreamedAnswer(() => undefined).completion('asked')).toEqual({ malformed: 'stream ended without an answer' });
  });

  it('refuses an event that is not JSON, and an error sent mid-stream', () => {
    const answer = new StreamedAnswer(() => undefined);
    expect(answer.add('{"choices": [')).toMatch(/^malformed stream event/);
    expect(answer.add(JSON.stringify({ error: { message: 'overloaded' } }))).toMatch(/^upstream failed mid-stream: .*overloaded/);
  });
});
