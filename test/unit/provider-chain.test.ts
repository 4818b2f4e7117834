// The provider chain against real HTTP upstreams (the upstream simulator on free ports):
// failover, circuit breaking, routing by priority, key rotation, malformed answers.
import { createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { BridgeError, type Priority } from '../../contract/index.js';
import { createLogger } from '../../bridge/logger.js';
import { MemoryBreakerStore } from '../../bridge/upstream/breaker.js';
import type { UpstreamCall } from '../../bridge/upstream/call.js';
import { ProviderChain, type ProviderChainOptions } from '../../bridge/upstream/chain.js';
import type { ProviderOptions } from '../../bridge/upstream/provider.js';
import { simEmbedding, startUpstreamSim, type UpstreamSim, type UpstreamSimOptions } from '../../upstream-sim/sim.js';
import { logSink } from '../helpers/log-sink.js';

const sims: UpstreamSim[] = [];
const chains: ProviderChain[] = [];

afterEach(async () => {
  await Promise.all(chains.splice(0).map((c) => c.close()));
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

async function sim(opts: Partial<UpstreamSimOptions> = {}): Promise<UpstreamSim> {
  const s = await startUpstreamSim({ port: 0, latencyMs: 2, ...opts });
  sims.push(s);
  return s;
}

/** A URL on which nothing listens: connections are refused at once. */
async function closedPortUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}/v1`;
}

const provider = (name: string, baseUrl: string, extra: Partial<ProviderOptions> = {}): ProviderOptions => ({
  name,
  baseUrl,
  apiKeys: [`sk-${name}-0001`],
  timeoutMs: 1000,
  ...extra,
});

const COOLDOWN_MS = 600;

function chain(providers: ProviderOptions[], extra: Partial<ProviderChainOptions> = {}): ProviderChain {
  const c = new ProviderChain({
    providers,
    breaker: { store: new MemoryBreakerStore(), consecutiveFailures: 2, errorRate: 1, windowMs: 10_000, minCalls: 100, cooldownMs: COOLDOWN_MS },
    maxAttempts: 3,
    maxRateLimitedRetries: 10,
    backoff: { baseMs: 5, maxMs: 20 },
    logger: createLogger('silent'),
    ...extra,
  });
  chains.push(c);
  return c;
}

let seq = 0;
function call(extra: Partial<UpstreamCall> = {}): UpstreamCall {
  seq += 1;
  return {
    requestId: `r-${seq}`,
    deviceId: 'cam-1',
    priority: 'normal',
    requestedModel: undefined,
    body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `question ${seq}` }] },
    ...extra,
  };
}

async function failureOf(promise: Promise<unknown>): Promise<BridgeError> {
  const err = await promise.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(BridgeError);
  return err as BridgeError;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const modelsSeen = (s: UpstreamSim): unknown[] => s.requests.map((r) => (r.body as { model: unknown }).model);

describe('ProviderChain: failover', () => {
  it('answers from the fallback, with the fallback model, when the primary refuses connections', async () => {
    const fallback = await sim();
    const c = chain([provider('primary', await closedPortUrl()), provider('fallback', fallback.url, { model: 'fallback-model' })]);
    const result = await c.call(call());
    expect(result).toMatchObject({ provider: 'fallback', model: 'fallback-model', attempts: 2 });
    expect(result.content).toMatch(/^sim answer to: question/);
    expect(modelsSeen(fallback)).toEqual(['fallback-model']);
  });

  it('answers from the fallback when the primary answers 500, without backing off in between', async () => {
    const primary = await sim({ errorRate: 1 });
    const fallback = await sim();
    const c = chain([provider('primary', primary.url), provider('fallback', fallback.url, { model: 'fallback-model' })], {
      backoff: { baseMs: 5000, maxMs: 5000 },
      random: () => 1,
    });
    const started = Date.now();
    const result = await c.call(call({ requestedModel: 'gpt-4o', body: { model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] } }));
    expect(Date.now() - started).toBeLessThan(1000);
    expect(result).toMatchObject({ provider: 'fallback', model: 'fallback-model', attempts: 2 });
    // The primary got the requested model; the fallback its own.
    expect(modelsSeen(primary)).toEqual(['gpt-4o']);
    expect(modelsSeen(fallback)).toEqual(['fallback-model']);
  });

  it('counts MAX_ATTEMPTS across the chain, wrapping around to the primary', async () => {
    const primary = await sim({ errorRate: 1 });
    const fallback = await sim({ errorRate: 1 });
    const c = chain([provider('primary', primary.url), provider('fallback', fallback.url)], {
      breaker: undefined,
      maxAttempts: 3,
    });
    const err = await failureOf(c.call(call()));
    expect(err.code).toBe('upstream_error');
    expect(err.message).toMatch(/failed after 3 attempts; last: upstream answered 500/);
    expect(primary.requests).toHaveLength(2);
    expect(fallback.requests).toHaveLength(1);
  });

  it('does not fail over a request the upstream refused as bad (400)', async () => {
    const primary = await sim();
    const fallback = await sim();
    primary.script({ status: 400 });
    const c = chain([provider('primary', primary.url), provider('fallback', fallback.url)]);
    const err = await failureOf(c.call(call()));
    expect(err.code).toBe('upstream_error');
    expect(err.message).toContain('400');
    expect(fallback.requests).toHaveLength(0);
  });
});

describe('ProviderChain: circuit breaker', () => {
  it('opens after consecutive failures, sends nothing to the primary during the cool-down, probes once, closes on success', async () => {
    const primary = await sim({ errorRate: 1 });
    const fallback = await sim();
    const c = chain([provider('primary', primary.url), provider('fallback', fallback.url, { model: 'fallback-model' })]);

    // Two failures in a row (consecutiveFailures: 2) open the primary's circuit; both calls are
    // still answered by the fallback.
    for (let i = 0; i < 2; i += 1) expect(await c.call(call())).toMatchObject({ provider: 'fallback', attempts: 2 });
    expect(primary.requests).toHaveLength(2);
    expect(c.health()[0]).toMatchObject({ name: 'primary', circuit: 'open' });
    const openedAt = Date.now();

    // During the cool-down nothing goes to the primary, even once it is healthy again.
    primary.setOptions({ errorRate: 0 });
    for (let i = 0; i < 5; i += 1) {
      expect(await c.call(call())).toMatchObject({ provider: 'fallback', model: 'fallback-model', attempts: 1 });
    }
    expect(Date.now() - openedAt).toBeLessThan(COOLDOWN_MS);
    expect(primary.requests).toHaveLength(2);

    // After the cool-down: of concurrent calls exactly one probes the primary.
    await sleep(COOLDOWN_MS - (Date.now() - openedAt) + 20);
    primary.setOptions({ latencyMs: 100 }); // the probe is still running when the others arrive
    const results = await Promise.all(Array.from({ length: 6 }, () => c.call(call())));
    expect(results.filter((r) => r.provider === 'primary')).toHaveLength(1);
    expect(results.filter((r) => r.provider === 'fallback')).toHaveLength(5);
    expect(primary.requests).toHaveLength(3);
    expect(c.health()[0]?.circuit).toBe('closed');

    // Closed: calls go to the primary again, with the primary's model.
    primary.setOptions({ latencyMs: 2 });
    const back = await c.call(call());
    expect(back).toMatchObject({ provider: 'primary', model: 'gpt-4o-mini', attempts: 1 });
  });

  it('opens again for another cool-down when the probe fails', async () => {
    const primary = await sim({ errorRate: 1 });
    const fallback = await sim();
    const c = chain([provider('primary', primary.url), provider('fallback', fallback.url)]);
    await c.call(call());
    await c.call(call());
    expect(primary.requests).toHaveLength(2);
    await sleep(COOLDOWN_MS + 20);
    // The probe fails (the primary still answers 500) and the fallback answers.
    expect(await c.call(call())).toMatchObject({ provider: 'fallback', attempts: 2 });
    expect(primary.requests).toHaveLength(3);
    expect(c.health()[0]?.circuit).toBe('open');
    for (let i = 0; i < 3; i += 1) await c.call(call());
    expect(primary.requests).toHaveLength(3);
  });

  it('fails at once with upstream_error when every circuit is open', async () => {
    const primary = await sim({ errorRate: 1 });
    const c = chain([provider('primary', primary.url)], { maxAttempts: 2 });
    const first = await failureOf(c.call(call()));
    expect(first.code).toBe('upstream_error');
    expect(primary.requests).toHaveLength(2);

    const started = Date.now();
    const err = await failureOf(c.call(call()));
    expect(Date.now() - started).toBeLessThan(100);
    expect(err.code).toBe('upstream_error');
    expect(err.message).toMatch(/^no provider available \(primary: circuit open, half-opens in \d\.\d s\)$/);
    expect(err.retryAfterMs).toBeGreaterThan(0);
    expect(err.retryAfterMs).toBeLessThanOrEqual(COOLDOWN_MS);
    expect(primary.requests).toHaveLength(2);
  });
});

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
    expect(() =>
      chain([provider('primary', 'http://127.0.0.1:1/v1')], { routing: { low: { provider: 'nope', model: undefined } } }),
    ).toThrow(/routing\.low: unknown provider "nope"/);
  });
});

describe('ProviderChain: keys', () => {
  it('takes a revoked key (401) out of rotation for good; the others share the traffic', async () => {
    const primary = await sim({ revokedKeys: ['sk-revoked-2222'] });
    const c = chain([provider('primary', primary.url, { apiKeys: ['sk-good-1111', 'sk-revoked-2222', 'sk-good-3333'] })], {
      maxAttempts: 2,
    });
    const results = [];
    for (let i = 0; i < 12; i += 1) results.push(await c.call(call()));
    // Concurrent calls too: none of them picks the revoked key again.
    results.push(...(await Promise.all(Array.from({ length: 12 }, () => c.call(call())))));
    expect(results.every((r) => r.provider === 'primary')).toBe(true);
    expect(results.map((r) => r.attempts).sort()).toEqual([...Array<number>(23).fill(1), 2]);
    const { byKey, byStatus } = primary.stats();
    expect(byKey['…2222']).toBe(1);
    expect(byStatus['401']).toBe(1);
    expect(byKey['…1111']).toBeGreaterThanOrEqual(11);
    expect(byKey['…3333']).toBeGreaterThanOrEqual(11);
    expect(c.health()[0]?.keys).toEqual({ total: 3, healthy: 2, cooling: 0, revoked: 1 });
  });

  it('logs a revoked key by its short hash, never the key', async () => {
    const primary = await sim({ revokedKeys: ['sk-secret-revoked'] });
    const sink = logSink();
    const c = chain([provider('primary', primary.url, { apiKeys: ['sk-secret-revoked', 'sk-secret-ok'] })], {
      logger: createLogger('info', sink.stream),
    });
    await c.call(call());
    await c.call(call());
    const logged = sink.text();
    expect(logged).toContain('upstream refused an API key: taken out of rotation');
    expect(logged).toMatch(/"keyId":"[0-9a-f]{8}"/);
    expect(logged).not.toContain('sk-secret');
  });

  it('fails over to the next provider when every key of the first is refused', async () => {
    const primary = await sim({ revokedKeys: ['sk-primary-0001'] });
    const fallback = await sim();
    const c = chain([provider('primary', primary.url), provider('fallback', fallback.url)]);
    expect(await c.call(call())).toMatchObject({ provider: 'fallback', attempts: 2 });
    expect(await c.call(call())).toMatchObject({ provider: 'fallback', attempts: 1 });
    expect(primary.requests).toHaveLength(1);
  });

  it('cools a key after a 429 for its Retry-After and moves the traffic to the other key at once', async () => {
    const primary = await sim();
    primary.script({ status: 429, retryAfterS: 5 });
    const c = chain([provider('primary', primary.url, { apiKeys: ['sk-a-aaaa', 'sk-b-bbbb'] })]);
    const paused: number[] = [];
    const started = Date.now();
    const first = await c.call(call({ onRateLimited: (ms) => paused.push(ms) }));
    expect(first).toMatchObject({ attempts: 1 });
    expect(Date.now() - started).toBeLessThan(500);
    for (let i = 0; i < 6; i += 1) await c.call(call({ onRateLimited: (ms) => paused.push(ms) }));
    // Another key was ready: the fleet was never paused.
    expect(paused).toEqual([]);
    expect(primary.requests.map((r) => r.headers['authorization'])).toEqual([
      'Bearer sk-a-aaaa',
      ...Array<string>(7).fill('Bearer sk-b-bbbb'),
    ]);
    expect(c.health()[0]?.keys).toEqual({ total: 2, healthy: 1, cooling: 1, revoked: 0 });
  });

  it('moves to the fallback when the primary\'s only key is rate-limited, without pausing the fleet', async () => {
    const primary = await sim();
    const fallback = await sim();
    primary.script({ status: 429, retryAfterS: 5 });
    const c = chain([provider('primary', primary.url), provider('fallback', fallback.url)]);
    const paused: number[] = [];
    expect(await c.call(call({ onRateLimited: (ms) => paused.push(ms) }))).toMatchObject({ provider: 'fallback', attempts: 1 });
    expect(await c.call(call({ onRateLimited: (ms) => paused.push(ms) }))).toMatchObject({ provider: 'fallback', attempts: 1 });
    expect(paused).toEqual([]);
    expect(primary.requests).toHaveLength(1);
  });

  it('waits and pauses the fleet only when the whole chain is rate-limited', async () => {
    const primary = await sim();
    const fallback = await sim();
    primary.script({ status: 429, retryAfterS: 1 });
    fallback.script({ status: 429, retryAfterS: 1 });
    const c = chain([provider('primary', primary.url), provider('fallback', fallback.url)]);
    const paused: number[] = [];
    const started = Date.now();
    const result = await c.call(call({ onRateLimited: (ms) => paused.push(ms) }));
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(result).toMatchObject({ provider: 'primary', attempts: 1 });
    expect(paused).toHaveLength(1);
    expect(paused[0]).toBeGreaterThan(900);
  });
});

describe('ProviderChain: bad answers', () => {
  it('turns malformed JSON into upstream_error with a clear message, and survives it', async () => {
    const primary = await sim();
    primary.script({ malformed: true }, { malformed: true }, { malformed: true });
    const c = chain([provider('primary', primary.url)], { breaker: undefined });
    const err = await failureOf(c.call(call()));
    expect(err.code).toBe('upstream_error');
    expect(err.message).toMatch(/failed after 3 attempts; last: unusable answer \(200\): answer is not valid JSON: \{"id":"chatcmpl-sim-malformed"/);
    // The next call is answered normally.
    expect(await c.call(call())).toMatchObject({ attempts: 1 });
  });

  it('retries a malformed answer on the next provider', async () => {
    const primary = await sim();
    const fallback = await sim();
    primary.script({ malformed: true });
    const c = chain([provider('primary', primary.url), provider('fallback', fallback.url)]);
    expect(await c.call(call())).toMatchObject({ provider: 'fallback', attempts: 2 });
  });

  it('times out a body trickled past the timeout, and takes one trickled within it', async () => {
    const primary = await sim();
    primary.script({ slowBodyMs: 600 }, { slowBodyMs: 600 }, { slowBodyMs: 100 });
    const c = chain([provider('primary', primary.url, { timeoutMs: 300 })], { breaker: undefined, maxAttempts: 2 });
    const err = await failureOf(c.call(call()));
    expect(err.code).toBe('upstream_timeout');
    expect(err.message).toContain('no answer within 300 ms in 2 attempts');
    expect(await c.call(call())).toMatchObject({ attempts: 1 });
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

  it('returns an array input\'s vectors in input order, sorted by `index`', async () => {
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

  it('never sends a provider\'s own (chat) model, nor a priority route\'s model; the model map applies', async () => {
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
    const base64 = { status: 200, body: { data: [{ index: 0, embedding: 'AAAAAA==' }, { index: 1, embedding: 'AAAAAA==' }], model: 'm' } };
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
