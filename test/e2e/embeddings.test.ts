// Embeddings (`input` instead of `messages`) through the whole bridge: same pipeline as chat,
// POST /v1/embeddings upstream, `embedding` / `embeddings` in the reply.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { simEmbedding } from '../../upstream-sim/sim.js';
import { startFleet, type Fleet } from '../helpers/fleet.js';
import { ask, okOf, startHarness, type Harness } from '../helpers/harness.js';
import { readUntil } from '../helpers/wait.js';

function configFile(content: unknown): string {
  const file = join(mkdtempSync(join(tmpdir(), 'eab-emb-')), 'config.json');
  writeFileSync(file, JSON.stringify(content));
  return file;
}

describe('embeddings', () => {
  let h: Harness | undefined;
  let fleet: Fleet | undefined;
  afterEach(async () => {
    await h?.close();
    await fleet?.close();
    h = undefined;
    fleet = undefined;
  });

  it("answers a string input with `embedding`: the simulator's vector, from POST /v1/embeddings with the embedding model", async () => {
    h = await startHarness();
    const device = await h.device('cam-1');
    await device.publish('normal', { id: 'e1', input: 'scratch on part 7' });
    const reply = okOf((await device.reply('e1'))[0]);

    expect(reply).toMatchObject({
      id: 'e1',
      ok: true,
      model: 'text-embedding-3-small',
      content: null,
      finish_reason: null,
      cached: false,
      attempts: 1,
      priority: 'normal',
    });
    expect(reply.embedding).toEqual(simEmbedding('scratch on part 7'));
    expect(reply.embeddings).toBeUndefined();
    expect(reply.usage).toEqual({ prompt_tokens: 5, completion_tokens: 0, total_tokens: 5 });
    expect(reply.timing.total_ms).toBeGreaterThanOrEqual(reply.timing.upstream_ms);

    expect(h.upstream.requests).toHaveLength(1);
    const [seen] = h.upstream.requests;
    expect(seen?.path).toBe('/v1/embeddings');
    expect(seen?.body).toEqual({ model: 'text-embedding-3-small', input: 'scratch on part 7' });
  });

  it('answers an array input with `embeddings`, in input order', async () => {
    h = await startHarness();
    const device = await h.device('cam-2');
    const input = ['scratch on part 7', 'dent on part 8', 'clean part 9'];
    await device.publish('high', { id: 'e2', input, dimensions: 24, encoding_format: 'float' });
    const reply = okOf((await device.reply('e2'))[0]);

    expect(reply.embeddings).toEqual(input.map((s) => simEmbedding(s, 24)));
    expect(reply.embedding).toBeUndefined();
    expect(reply).toMatchObject({ content: null, finish_reason: null, priority: 'high', usage: { completion_tokens: 0 } });
    expect(h.upstream.requests[0]?.body).toEqual({ model: 'text-embedding-3-small', input, dimensions: 24, encoding_format: 'float' });
  });

  it('answers a repeated identical embeddings request from the cache, never from a chat answer', async () => {
    h = await startHarness();
    const a = await h.device('cam-3');
    const b = await h.device('cam-4');
    await a.publish('normal', { id: 'first', input: 'weld seam 12' });
    const first = okOf((await a.reply('first'))[0]);
    await b.publish('low', { id: 'second', input: 'weld seam 12' });
    const second = okOf((await b.reply('second'))[0]);

    expect(h.upstream.requests).toHaveLength(1);
    expect(first.cached).toBe(false);
    expect(second).toMatchObject({ id: 'second', cached: true, attempts: 0, priority: 'low', model: first.model, usage: first.usage });
    expect(second.embedding).toEqual(first.embedding);

    // A chat request about the same text is a different request.
    await a.publish('normal', ask('chat', 'weld seam 12'));
    const chat = okOf((await a.reply('chat'))[0]);
    expect(chat).toMatchObject({ cached: false, content: 'sim answer to: weld seam 12' });
    expect(chat.embedding).toBeUndefined();
    expect(h.upstream.requests.map((r) => r.path)).toEqual(['/v1/embeddings', '/v1/chat/completions']);
  });

  it('refuses input together with messages, chat parameters with input, and base64', async () => {
    h = await startHarness();
    const device = await h.device('cam-5');
    await device.publish('normal', { id: 'both', input: 'x', messages: [{ role: 'user', content: 'x' }] });
    await device.publish('normal', { id: 'tokens', input: 'x', max_tokens: 5 });
    await device.publish('normal', { id: 'b64', input: 'x', encoding_format: 'base64' });
    const errors = await Promise.all(['both', 'tokens', 'b64'].map(async (id) => (await device.reply(id))[0]));
    expect(errors).toEqual([
      {
        id: 'both',
        ok: false,
        priority: 'normal',
        error: { code: 'invalid_request', message: 'give one of messages (chat), input (embeddings) or template, not messages and input' },
      },
      {
        id: 'tokens',
        ok: false,
        priority: 'normal',
        error: {
          code: 'invalid_request',
          message: 'max_tokens: max_tokens applies to chat requests (messages), not to embeddings requests (input)',
        },
      },
      {
        id: 'b64',
        ok: false,
        priority: 'normal',
        error: {
          code: 'invalid_request',
          message: 'encoding_format: only "float" is supported: the reply carries the vectors as numbers',
        },
      },
    ]);
    expect(h.upstream.requests).toHaveLength(0);
  });

  it('uses CONFIG_FILE embeddingModel (never UPSTREAM_MODEL) unless the request names a model, and records usage', async () => {
    const file = configFile({ embeddingModel: 'emb-custom', prices: { 'emb-custom': { inputPerMillion: 1000, outputPerMillion: 0 } } });
    h = await startHarness({ CONFIG_FILE: file, UPSTREAM_MODEL: 'chat-model' });
    const device = await h.device('cam-6');
    await device.publish('normal', { id: 'd1', input: 'bolt 1' });
    await device.publish('normal', { id: 'd2', input: 'bolt 2', model: 'emb-named' });
    const [d1, d2] = await Promise.all(['d1', 'd2'].map(async (id) => okOf((await device.reply(id))[0])));
    expect(d1?.model).toBe('emb-custom');
    expect(d2?.model).toBe('emb-named');
    expect(h.upstream.requests.map((r) => (r.body as { model: string }).model).sort()).toEqual(['emb-custom', 'emb-named']);

    // Usage is recorded right after the reply.
    const recorded = (r: { byModel: Record<string, unknown> }): boolean => r.byModel['emb-custom'] !== undefined && r.byModel['emb-named'] !== undefined;
    const store = h.bridge.store;
    const report = await readUntil(() => store.operations.usage(Date.now() - 60_000, Date.now()), recorded);
    expect(report.byModel['emb-custom']).toMatchObject({ requests: 1, promptTokens: d1?.usage?.prompt_tokens, completionTokens: 0 });
    expect(report.byModel['emb-custom']?.costUsd).toBeCloseTo(((d1?.usage?.prompt_tokens ?? 0) * 1000) / 1e6, 12);
  });

  it('keeps the idempotency guarantee: a repeated (deviceId, id) gets the stored reply again', async () => {
    h = await startHarness();
    const device = await h.device('cam-7');
    await device.publish('normal', { id: 'same', input: ['a', 'b'] });
    const [first] = await device.reply('same');
    await device.publish('normal', { id: 'same', input: 'something else' });
    const replies = await device.reply('same', { count: 2 });
    expect(replies[1]).toEqual(first);
    expect(h.upstream.requests).toHaveLength(1);
  });

  it('works across instances on Redis: the cache answers the second instance', async () => {
    fleet = await startFleet(2);
    const [one, two] = fleet.instances as [Harness, Harness];
    const a = await one.device('line-1');
    const b = await two.device('line-2');
    await a.publish('normal', { id: 'r1', input: ['x', 'y'], lock: 'line' });
    const first = okOf((await a.reply('r1', { timeoutMs: 10_000 }))[0]);
    await b.publish('normal', { id: 'r2', input: ['x', 'y'] });
    const second = okOf((await b.reply('r2', { timeoutMs: 10_000 }))[0]);
    expect(first.embeddings).toEqual([simEmbedding('x'), simEmbedding('y')]);
    expect(second).toMatchObject({ cached: true, embeddings: first.embeddings });
    expect(fleet.upstream.requests).toHaveLength(1);
  });
});
