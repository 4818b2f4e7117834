// The upstream client (a chain of one provider, no breaker) against a scripted HTTP upstream:
// the request it sends, key rotation, retries, 429s, timeouts and refused requests.
import { afterEach, describe, expect, it } from 'vitest';
import type { InferRequest } from '../../contract/index.js';
import { buildUpstreamBody } from '../../bridge/upstream/body.js';
import { failureOf } from '../helpers/provider-chain.js';
import { call, client, closeClientsAndUpstreams, failure, scripted, type Step } from '../helpers/scripted-upstream.js';

afterEach(closeClientsAndUpstreams);

describe('buildUpstreamBody', () => {
  it('keeps model, messages and passthrough fields only', () => {
    const request: InferRequest = {
      id: 'r-9',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 5,
      seed: 7,
      lock: 'line-3',
      ttl_ms: 100,
      cache: false,
    };
    expect(buildUpstreamBody(request, 'default-model')).toEqual({
      model: 'default-model',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 5,
      seed: 7,
    });
    expect(buildUpstreamBody({ ...request, model: 'm2' }, 'default-model').model).toBe('m2');
  });
});

describe('UpstreamClient', () => {
  it('posts to {baseUrl}/chat/completions with key, body and extra headers', async () => {
    const up = await scripted([{}]);
    const request: InferRequest = {
      id: 'r-1',
      messages: [{ role: 'user', content: 'Is there a scratch?' }],
      max_tokens: 256,
      temperature: 0.2,
      top_p: 0.9,
      stop: ['\n'],
      response_format: { type: 'json_object' },
      seed: 42,
      lock: 'line-3/robot-arm',
      ttl_ms: 5000,
      cache: true,
    };
    const startedAt = performance.now();
    const result = await client(up.url).call(
      call({ body: buildUpstreamBody(request, 'gpt-4o-mini'), headers: { 'X-Lock-Key': 'line-3/robot-arm', 'X-Lock-Fence': '17' } }),
    );
    const elapsedMs = performance.now() - startedAt;

    expect(result).toMatchObject({
      model: 'gpt-4o-mini-2024-07-18',
      content: 'No scratch found.',
      finish_reason: 'stop',
      usage: { prompt_tokens: 21, completion_tokens: 5, total_tokens: 26 },
      attempts: 1,
    });
    // The upstream's own time: within the call, not made up.
    expect(result.upstreamMs).toBeGreaterThanOrEqual(0);
    expect(result.upstreamMs).toBeLessThanOrEqual(elapsedMs + 1);
    expect(up.seen).toHaveLength(1);
    const [seen] = up.seen;
    expect(seen?.path).toBe('/v1/chat/completions');
    expect(seen?.headers['authorization']).toBe('Bearer sk-test-one');
    expect(seen?.headers['content-type']).toBe('application/json');
    expect(seen?.headers['x-lock-key']).toBe('line-3/robot-arm');
    expect(seen?.headers['x-lock-fence']).toBe('17');
    expect(seen?.body).toEqual({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Is there a scratch?' }],
      max_tokens: 256,
      temperature: 0.2,
      top_p: 0.9,
      stop: ['\n'],
      response_format: { type: 'json_object' },
      seed: 42,
    });
  });

  it('sends no Authorization header without keys and copes with a bare base URL', async () => {
    const up = await scripted([{}]);
    await client(up.url.replace('/v1', '/'), { apiKeys: [] }).call(call());
    expect(up.seen[0]?.path).toBe('/chat/completions');
    expect(up.seen[0]?.headers['authorization']).toBeUndefined();
  });

  it('rotates keys round-robin across calls', async () => {
    const up = await scripted([{}]);
    const c = client(up.url, { apiKeys: ['k1', 'k2'] });
    await c.call(call());
    await c.call(call());
    await c.call(call());
    expect(up.seen.map((s) => s.headers['authorization'])).toEqual(['Bearer k1', 'Bearer k2', 'Bearer k1']);
  });

  it('retries 5xx and reports the attempts used', async () => {
    const up = await scripted([failure(500, 'boom'), failure(503, 'busy'), {}]);
    const result = await client(up.url).call(call());
    expect(result.attempts).toBe(3);
    expect(up.seen).toHaveLength(3);
  });

  it('fails with upstream_error after maxAttempts of 5xx', async () => {
    const up = await scripted([failure(500, 'engine on fire')]);
    const err = await failureOf(client(up.url, { maxAttempts: 4 }).call(call()));
    expect(err.code).toBe('upstream_error');
    expect(err.message).toContain('500');
    expect(err.message).toContain('engine on fire');
    expect(up.seen).toHaveLength(4);
  });

  it('lets a call lower, but not raise, maxAttempts', async () => {
    const up = await scripted([failure(500, 'boom')]);
    const c = client(up.url, { maxAttempts: 3 });
    expect((await failureOf(c.call(call({ maxAttempts: 2 })))).code).toBe('upstream_error');
    expect(up.seen).toHaveLength(2);
    expect((await failureOf(c.call(call({ maxAttempts: 9 })))).code).toBe('upstream_error');
    expect(up.seen).toHaveLength(5);
  });

  it('counts a malformed or choiceless 200 as a failed attempt', async () => {
    const up = await scripted([{ body: 'not json' }, { body: { object: 'chat.completion' } }, {}]);
    const result = await client(up.url).call(call());
    expect(result.attempts).toBe(3);
    expect(result.content).toBe('No scratch found.');
  });

  it('honours Retry-After on 429 without using up an attempt', async () => {
    const up = await scripted([failure(429, 'slow down', { headers: { 'retry-after': '1' } }), {}]);
    const rateLimited: number[] = [];
    const before: number[] = [];
    const result = await client(up.url, { maxAttempts: 1 }).call(
      call({
        onRateLimited: (ms) => rateLimited.push(ms),
        beforeAttempt: async (n) => {
          before.push(n);
        },
      }),
    );
    expect(result.attempts).toBe(1);
    expect(rateLimited).toEqual([1000]);
    expect(before).toEqual([1, 2]);
    expect(up.seen).toHaveLength(2);
    const gap = (up.seen[1]?.at ?? 0) - (up.seen[0]?.at ?? 0);
    expect(gap).toBeGreaterThanOrEqual(900);
  });

  it('moves to the next key after a 429', async () => {
    const up = await scripted([failure(429, 'slow down', { headers: { 'retry-after': '0' } }), {}]);
    await client(up.url, { apiKeys: ['k1', 'k2'] }).call(call());
    expect(up.seen.map((s) => s.headers['authorization'])).toEqual(['Bearer k1', 'Bearer k2']);
  });

  it('fails with upstream_error once 429s exceed maxRateLimitedRetries', async () => {
    const up = await scripted([failure(429, 'slow down')]);
    let rateLimited = 0;
    const err = await failureOf(client(up.url, { maxRateLimitedRetries: 2 }).call(call({ onRateLimited: () => (rateLimited += 1) })));
    expect(err.code).toBe('upstream_error');
    expect(err.message).toContain('429');
    expect(up.seen).toHaveLength(3);
    expect(rateLimited).toBe(3);
  });

  it('treats a 429 for insufficient_quota as a dead key, not a wait', async () => {
    const quota: Step = { status: 429, body: { error: { message: 'You exceeded your quota', code: 'insufficient_quota' } } };
    const up = await scripted([quota, {}]);
    let rateLimited = 0;
    const result = await client(up.url, { apiKeys: ['k1', 'k2'] }).call(call({ onRateLimited: () => (rateLimited += 1) }));
    expect(result.attempts).toBe(2);
    expect(rateLimited).toBe(0);
    expect(up.seen.map((s) => s.headers['authorization'])).toEqual(['Bearer k1', 'Bearer k2']);
  });

  it('fails with upstream_timeout when every attempt hangs', async () => {
    const up = await scripted([{ hang: true }]);
    const started = Date.now();
    const err = await failureOf(client(up.url, { timeoutMs: 200, maxAttempts: 2 }).call(call()));
    expect(err.code).toBe('upstream_timeout');
    expect(up.seen).toHaveLength(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(380);
  });

  it('times out a body that starts but never finishes', async () => {
    // Headers arrive at once, the body never ends: the per-attempt timeout must cover it.
    const up = await scripted([{ stall: true }]);
    const c = client(up.url, { timeoutMs: 200, maxAttempts: 1 });
    const err = await failureOf(c.call(call()));
    expect(err.code).toBe('upstream_timeout');
  });

  it('fails with upstream_error when only some attempts timed out', async () => {
    const up = await scripted([{ hang: true }, failure(502, 'bad gateway')]);
    const err = await failureOf(client(up.url, { timeoutMs: 200, maxAttempts: 2 }).call(call()));
    expect(err.code).toBe('upstream_error');
    expect(up.seen).toHaveLength(2);
  });

  it('fails at once on a 400, with the status and a truncated upstream message', async () => {
    const up = await scripted([failure(400, `bad messages ${'x'.repeat(1000)}`)]);
    const err = await failureOf(client(up.url).call(call()));
    expect(err.code).toBe('invalid_request');
    expect(err.message).toContain('the upstream refused the request: 400');
    expect(err.message).toContain('bad messages');
    expect(err.message.length).toBeLessThan(300);
    expect(up.seen).toHaveLength(1);
  });

  it('cuts the key out of a refusal that echoes it', async () => {
    const up = await scripted([failure(422, 'bad field for key sk-test-one')]);
    const err = await failureOf(client(up.url).call(call()));
    expect(err.code).toBe('invalid_request');
    expect(err.message).toBe('the upstream refused the request: 422 bad field for key [redacted]');
  });

  it('probes a key after a 401 and, when GET /models refuses it too, moves to the second key, counting an attempt', async () => {
    const up = await scripted([failure(401, 'invalid api key'), failure(401, 'invalid api key'), {}]);
    const c = client(up.url, { apiKeys: ['k1', 'k2'] });
    const result = await c.call(call());
    expect(result.attempts).toBe(2);
    expect(up.seen.map((s) => [s.path, s.headers['authorization']])).toEqual([
      ['/v1/chat/completions', 'Bearer k1'],
      ['/v1/models', 'Bearer k1'],
      ['/v1/chat/completions', 'Bearer k2'],
    ]);
    expect(c.health()[0]?.keys.list.map((k) => k.state)).toEqual(['revoked', 'healthy']);
  });

  it('fails a 403 alone with invalid_request when the key answers GET /models: the refusal was about the request', async () => {
    const up = await scripted([failure(403, 'key may not use this model'), {}, failure(403, 'key may not use this model'), {}]);
    const c = client(up.url);
    const err = await failureOf(c.call(call()));
    expect(err.code).toBe('invalid_request');
    expect(err.message).toBe('the upstream refused the request: 403 key may not use this model (model "gpt-4o-mini"; the API key itself is accepted)');
    expect(up.seen.map((s) => s.path)).toEqual(['/v1/chat/completions', '/v1/models']);
    // The key stays in rotation; its verdict stands for a while, so the next refusal is not probed again.
    expect(c.health()[0]?.keys).toMatchObject({ healthy: 1, revoked: 0 });
    expect((await failureOf(c.call(call()))).code).toBe('invalid_request');
    expect(up.seen.map((s) => s.path)).toEqual(['/v1/chat/completions', '/v1/models', '/v1/chat/completions']);
    expect(await c.call(call())).toMatchObject({ attempts: 1 });
  });

  it('fails with upstream_error once every key is shown refused', async () => {
    const up = await scripted([failure(401, 'invalid api key')]);
    const c = client(up.url, { apiKeys: ['k1', 'k2'] });
    const err = await failureOf(c.call(call()));
    expect(err.code).toBe('upstream_error');
    expect(err.message).toContain('every API key was refused');
    expect(up.seen.map((s) => s.path)).toEqual(['/v1/chat/completions', '/v1/models', '/v1/chat/completions', '/v1/models']);
    expect(c.health()[0]?.keys).toMatchObject({ healthy: 0, revoked: 2 });
  });
});
