// The provider chain against real HTTP upstreams (the upstream simulator on free ports):
// failover to the next provider, circuit breaking, malformed and slow answers.
import { afterEach, describe, expect, it } from 'vitest';
import { call, chain, closeChainsAndSims, closedPortUrl, COOLDOWN_MS, failureOf, modelsSeen, provider, sim, sleep } from '../helpers/provider-chain.js';

afterEach(closeChainsAndSims);

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
    expect(err.code).toBe('invalid_request');
    expect(err.message).toContain('the upstream refused the request: 400');
    expect(fallback.requests).toHaveLength(0);
  });

  it.each([400, 404, 413, 422])('fails a request refused %i alone: one attempt, no breaker event, the key kept', async (status) => {
    const primary = await sim();
    const fallback = await sim();
    // Two failures in a row open this chain's circuits: three refusals must not.
    primary.script({ status }, { status }, { status });
    const c = chain([provider('primary', primary.url), provider('fallback', fallback.url)]);
    for (let i = 0; i < 3; i += 1) expect((await failureOf(c.call(call()))).code).toBe('invalid_request');
    expect(primary.requests).toHaveLength(3);
    expect(fallback.requests).toHaveLength(0);
    expect(c.health()[0]).toMatchObject({ circuit: 'closed', available: true, keys: { healthy: 1, revoked: 0 } });
    expect(await c.call(call())).toMatchObject({ provider: 'primary', attempts: 1 });
  });

  it('takes a 404 that is not an API error (a wrong base URL) as the provider failing: the fallback answers', async () => {
    const primary = await sim();
    const fallback = await sim();
    primary.script({ status: 404, body: '<html>Not Found</html>' });
    const c = chain([provider('primary', primary.url), provider('fallback', fallback.url)]);
    expect(await c.call(call())).toMatchObject({ provider: 'fallback' });
    expect(primary.requests).toHaveLength(1);
  });

  it('fails a request whose header undici cannot send alone, and sends it encoded', async () => {
    const primary = await sim();
    const c = chain([provider('primary', primary.url)]);
    for (const lock of ['ライン-3', 'line\r\nx-evil: 1', '50% é']) {
      expect(await c.call(call({ headers: { 'X-Lock-Key': lock, 'X-Lock-Fence': '1' } }))).toMatchObject({ attempts: 1 });
    }
    expect(primary.requests.map((r) => r.headers['x-lock-key'])).toEqual(['%E3%83%A9%E3%82%A4%E3%83%B3-3', 'line%0D%0Ax-evil:%201', '50%25%20%C3%A9']);
    expect(primary.requests.map((r) => decodeURIComponent(String(r.headers['x-lock-key'])))).toEqual(['ライン-3', 'line\r\nx-evil: 1', '50% é']);
    expect(primary.requests.every((r) => r.headers['x-evil'] === undefined)).toBe(true);
    expect(c.health()[0]).toMatchObject({ circuit: 'closed' });
  });

  it('fails a request undici refuses to send with invalid_request, sending nothing and recording no failure', async () => {
    const primary = await sim();
    const c = chain([provider('primary', primary.url), provider('fallback', primary.url)]);
    const err = await failureOf(c.call(call({ headers: { 'not a header name': 'x' } })));
    expect(err.code).toBe('invalid_request');
    expect(err.message).toContain('the request cannot be sent upstream');
    expect(primary.requests).toHaveLength(0);
    expect(c.health().map((p) => p.circuit)).toEqual(['closed', 'closed']);
  });

  it('fails a request whose body cannot be serialized with invalid_request, sending nothing', async () => {
    const primary = await sim();
    const c = chain([provider('primary', primary.url)]);
    const body = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'x' }], seed: 10n as unknown as number };
    const err = await failureOf(c.call(call({ body })));
    expect(err.code).toBe('invalid_request');
    expect(err.message).toContain('cannot be serialized');
    expect(primary.requests).toHaveLength(0);
    expect(c.health()[0]).toMatchObject({ circuit: 'closed', available: true });
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
