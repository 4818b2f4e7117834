// The client's streams against a real bridge: the text as it is written, a reset when the
// provider failed mid-answer, and the reply's content as the end of the story.
import { afterEach, describe, expect, it } from 'vitest';
import { BridgeClient, type StreamEvent } from '../../client/index.js';
import { BROKER_MODES, startHarness, type Harness } from '../helpers/harness.js';

let h: Harness | undefined;
let client: BridgeClient | undefined;
afterEach(async () => {
  await client?.close();
  await h?.close();
  client = h = undefined;
});

/** The text a screen would show after these events. */
const shown = (events: StreamEvent[]): string => events.reduce((text, e) => ('reset' in e ? '' : text + e.delta), '');

describe.each(BROKER_MODES)('client streams on the %s broker', (mode) => {
  it.each([5, 4] as const)('MQTT %i: reassembles a stream across a mid-stream reset into exactly the reply', async (protocolVersion) => {
    h = await startHarness({ STREAM_FLUSH_MS: '0' }, { streamChunkMs: 2 }, undefined, { mode });
    // The first call's stream: the role event, 3 pieces of text, then its connection drops; the bridge calls again.
    h.upstream.script({ streamBreak: { after: 4, then: 'drop' } });
    client = await BridgeClient.connect({ url: h.url, deviceId: 'hmi-1', protocolVersion });
    const question = 'What is the torque for bolt M8 on line three?';
    const stream = client.stream({ messages: [{ role: 'user', content: question }] });
    const events: StreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const reply = await stream.reply;
    expect(reply).toMatchObject({ ok: true, content: `sim answer to: ${question}`, attempts: 2 });
    const reset = events.findIndex((e) => 'reset' in e);
    expect(reset).toBeGreaterThan(0);
    expect(shown(events.slice(0, reset))).toBe(`sim answer to: ${question}`.slice(0, 24));
    expect(shown(events)).toBe(reply.content);
    expect(stream.text).toBe(reply.content);
    expect(h.upstream.requests).toHaveLength(2);
  });
});

describe('client streams', () => {
  it('gives a cached answer, which has no chunks, as one delta; a failed stream throws its error', async () => {
    h = await startHarness({}, { streamChunkMs: 1 });
    client = await BridgeClient.connect({ url: h.url, deviceId: 'hmi-2' });
    const ask = { messages: [{ role: 'user' as const, content: 'Count the parts.' }] };
    await client.chat(ask);
    const events: StreamEvent[] = [];
    const cached = client.stream(ask);
    for await (const event of cached) events.push(event);
    expect(events).toEqual([{ delta: 'sim answer to: Count the parts.' }]);
    expect((await cached.reply).cached).toBe(true);
    const failing = client.stream({ messages: [{ role: 'robot' as 'user', content: 'x' }] });
    await expect(
      (async () => {
        for await (const _ of failing) void _;
      })(),
    ).rejects.toMatchObject({ code: 'invalid_request' });
  });
});
