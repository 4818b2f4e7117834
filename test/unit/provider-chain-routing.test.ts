// The provider chain against real HTTP upstreams (the upstream simulator on free ports):
// routing by priority and model, and embeddings calls.
import { afterEach, describe, expect, it } from 'vitest';
import type { Priority } from '../../contract/index.js';
import type { UpstreamCall } from '../../bridge/upstream/call.js';
import { simEmbedding } from '../../upstream-sim/sim.js';
import { call, chain, closeChainsAndSims, closedPortUrl, failureOf, modelsSeen, provider, sim } from '../helpers/provider-chain.js';

afterEach(closeChainsAndSims);

describe('ProviderChain: routing by priority', () => {
  it('sends low to the cheaper provider and model, critical to the primary model', async () => {
    const primary = await sim();
    const cheap = await sim();
    const c = chain([provider('primary', primary.url), provider('cheap', cheap.url, { model: 'cheap-model' })], {
      routing: { low: { provider: 'cheap', model: undefined } },
    });
    const answer = (priority: Priority) => c.call(call({ priority }));
    expect(await answer('low')).toMatchObject({ provider: 'cheap', model: 'cheap-model' });
    expect(await answer('critical')).toMatchObject({ provider: 'primary', model: 'gpt-4o-mini' });
    expect(await answer('normal')).toMatchObject({ provider: 'primary', model: 'gpt-4o-mini' });
    expect(modelsSeen(cheap)).toEqual(['cheap-model']);
    expect(modelsSeen(primary)).toEqual(['gpt-4o-mini', 'gpt-4o-mini']);
  });

  it('sends a priority to another model on the same provider, overriding the requested one', async () => {
    const primary = await sim();
    const c = chain([provider('primary', primary.url)], {
      routing: { low: { provider: undefined, model: 'gpt-4o-mini-cheap' } },
    });
    const body = { model: 'gpt-4o', messages: [{ role: 'user' as const, content: 'x' }] };
    expect(await c.call(call({ priority: 'low', requestedModel: 'gpt-4o', body }))).toMatchObject({ model: 'gpt-4o-mini-cheap' });
    expect(await c.call(call({ priority: 'critical', requestedModel: 'gpt-4o', body }))).toMatchObject({ model: 'gpt-4o' });
  });

  it('maps a requested model to a provider and its model name', async () => {
    const primary = await sim();
    const local = await sim();
    const c = chain([provider('primary', primary.url), provider('local', local.url)], {
      models: { llama: { provider: 'local', model: 'llama-3.1-8b-instruct' }, fast: { provider: undefined, model: 'gpt-4o-mini' } },
      routing: { low: { provider: undefined, model: 'llama' } },
    });
    const body = (model: string) => ({ model, messages: [{ role: 'user' as const, content: 'x' }] });
    expect(await c.call(call({ requestedModel: 'llama', body: body('llama') }))).toMatchObject({
      provider: 'local',
      model: 'llama-3.1-8b-instruct',
    });
    expect(await c.call(call({ requestedModel: 'fast', body: body('fast') }))).toMatchObject({ provider: 'primary', model: 'gpt-4o-mini' });
    // routing low → model "llama", which the model map sends to the local provider
    expect(await c.call(call({ priority: 'low' }))).toMatchObject({ provider: 'local', model: 'llama-3.1-8b-instruct' });
  });

  it('fails a routed call over to the chain when its provider is down', async () => {
    const primary = await sim();
    const c = chain([provider('primary', primary.url), provider('cheap', await closedPortUrl(), { model: 'cheap-model' })], {
      routing: { low: { provider: 'cheap', model: undefined } },
    });
    expect(await c.call(call({ priority: 'low' }))).toMatchObject({ provider: 'primary', model: 'gpt-4o-mini', attempts: 2 });
  });

  it('refuses a route to an unknown provider', () => {
    expect(() => chain([provider('primary', 'http://127.0.0.1:1/v1')], { routing: { low: { provider: 'nope', model: undefined } } })).toThrow(
      /routing\.low: unknown provider "nope"/,
    );
  });
});

describe('ProviderChain: embeddings', () => {
  const embeddingsCall = (input: string | string[], extra: Partial<UpstreamCall> = {}): UpstreamCall =>
    call({ body: { model: 'text-embedding-3-small', input }, ...extra });

  it('posts {model, input, dimensions, encoding_format} to {baseUrl}/embeddings and returns the vector', async () => {
    const primary = await sim();
    const c = chain([provider('primary', primary.url)]);
    const result = await c.call(
      embeddingsCall('scratch on part 7', {
        body: { model: 'text-embedding-3-small', input: 'scratch on part 7', dimensions: 16, encoding_format: 'float' },
        headers: { 'X-Lock-Key': 'line-3', 'X-Lock-Fence': '4' },
      }),
    );
    expect(result).toMatchObject({ provider: 'primary', model: 'text-embedding-3-small', content: null, finish_reason: null, attempts: 1 });
    expect(result.embedding).toEqual(simEmbedding('scratch on part 7', 16));
    expect(result.embeddings).toBeUndefined();
    expect(result.usage).toEqual({ prompt_tokens: 5, completion_tokens: 0, total_tokens: 5 });
    expect(primary.requests).toHaveLength(1);
    const [seen] = primary.requests;
    expect(seen?.path).toBe('/v1/embeddings');
    expect(seen?.headers['x-lock-fence']).toBe('4');
    expect(seen?.body).toEqual({ model: 'text-embedding-3-small', input: 'scratch on part 7', dimensions: 16, encoding_format: 'float' });
  });

  it("returns an array input's vectors in input order, sorted by `index`", async () => {
    const primary = await sim();
    primary.script({
      status: 200,
      body: {
        object: 'list',
        data: [
          { object: 'embedding', index: 2, embedding: [3] },
          { object: 'embedding', index: 0, embedding: [1] },
          { object: 'embedding', index: 1, embedding: [2] },
        ],
        model: 'text-embedding-3-small-v2',
        usage: { prompt_tokens: 3, total_tokens: 3 },
      },
    });
    const c = chain([provider('primary', primary.url)]);
    const result = await c.call(embeddingsCall(['a', 'b', 'c']));
    expect(result.embeddings).toEqual([[1], [2], [3]]);
    expect(result.embedding).toBeUndefined();
    expect(result.model).toBe('text-embedding-3-small-v2');
    expect(result.usage).toEqual({ prompt_tokens: 3, completion_tokens: 0, total_tokens: 3 });
  });

  it("never sends a provider's own (chat) model, nor a priority route's model; the model map applies", async () => {
    const fallback = await sim();
    const c = chain([provider('primary', await closedPortUrl()), provider('fallback', fallback.url, { model: 'fallback-chat-model' })], {
      routing: { low: { provider: 'fallback', model: 'cheap-chat-model' } },
      models: { 'emb-alias': { provider: undefined, model: 'text-embedding-3-large' } },
    });
    // Failover to the fallback keeps the embedding model.
    expect(await c.call(embeddingsCall('x'))).toMatchObject({ provider: 'fallback', model: 'text-embedding-3-small', attempts: 2 });
    // routing.low's provider applies, its (chat) model does not.
    expect(await c.call(embeddingsCall('y', { priority: 'low' }))).toMatchObject({ provider: 'fallback', model: 'text-embedding-3-small', attempts: 1 });
    // The model map maps a requested embedding model.
    const aliased = call({ requestedModel: 'emb-alias', body: { model: 'emb-alias', input: 'z' } });
    expect(await c.call(aliased)).toMatchObject({ model: 'text-embedding-3-large' });
    expect(modelsSeen(fallback)).toEqual(['text-embedding-3-small', 'text-embedding-3-small', 'text-embedding-3-large']);
    expect(fallback.requests.every((r) => r.path === '/v1/embeddings')).toBe(true);
    // A chat call on the same chain still gets the routed and the provider's models.
    expect(await c.call(call({ priority: 'low' }))).toMatchObject({ provider: 'fallback', model: 'cheap-chat-model' });
  });

  it('turns malformed embeddings answers into upstream_error, retried like chat ones', async () => {
    const primary = await sim();
    const wrongCount = { status: 200, body: { data: [{ index: 0, embedding: [1] }], model: 'm' } };
    const base64 = {
      status: 200,
      body: {
        data: [
          { index: 0, embedding: 'AAAAAA==' },
          { index: 1, embedding: 'AAAAAA==' },
        ],
        model: 'm',
      },
    };
    primary.script({ malformed: true }, wrongCount, base64);
    const c = chain([provider('primary', primary.url)], { breaker: undefined });
    const err = await failureOf(c.call(embeddingsCall(['a', 'b'])));
    expect(err.code).toBe('upstream_error');
    expect(err.message).toMatch(/failed after 3 attempts; last: unusable answer \(200\): data\.0\.embedding is not a non-empty list of numbers/);
    expect(primary.requests.map((r) => r.path)).toEqual(['/v1/embeddings', '/v1/embeddings', '/v1/embeddings']);

    primary.script(wrongCount, wrongCount, wrongCount);
    const twoForOne = await failureOf(c.call(embeddingsCall(['a', 'b'])));
    expect(twoForOne.message).toMatch(/answer has 1 embeddings for 2 inputs/);
    // The next call is answered normally.
    expect(await c.call(embeddingsCall(['a', 'b']))).toMatchObject({ attempts: 1, embeddings: [simEmbedding('a'), simEmbedding('b')] });
  });

  it('retries a malformed embeddings answer on the next provider', async () => {
    const primary = await sim();
    const fallback = await sim();
    primary.script({ status: 200, body: { object: 'list', data: [] } });
    const c = chain([provider('primary', primary.url), provider('fallback', fallback.url)]);
    expect(await c.call(embeddingsCall('x'))).toMatchObject({ provider: 'fallback', attempts: 2, embedding: simEmbedding('x') });
  });
});
