// The provider chain against real HTTP upstreams (the upstream simulator on free ports): key
// rotation, refused keys and rate-limited ones.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { createLogger } from '../../bridge/logger.js';
import { logSink } from '../helpers/log-sink.js';
import { call, chain, closeChainsAndSims, failureOf, provider, sim } from '../helpers/provider-chain.js';
import { waitUntil } from '../helpers/wait.js';

afterEach(closeChainsAndSims);

/** An upstream without GET /models (404) that refuses the keys in `refused` (403) and answers every other. */
async function refusingUpstream(...keys: string[]): Promise<{ url: string; refused: Set<string> }> {
  const refused = new Set(keys);
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      if (req.url !== '/v1/chat/completions') return void res.writeHead(404).end('{"error":{"message":"not found"}}');
      if (refused.has(String(req.headers.authorization).replace('Bearer ', ''))) return void res.writeHead(403).end('{"error":{"message":"forbidden"}}');
      const answer = { model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }] };
      res.writeHead(200).end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, refused };
}

describe('ProviderChain: keys', () => {
  it('sets a revoked key aside once a probe with it is refused too; the others share the traffic', async () => {
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
    const { byKey, byStatus, byPath } = primary.stats();
    expect(byKey['…2222']).toBe(2); // the refused call and the probe
    expect(byPath['/v1/models']).toBe(1);
    expect(byStatus['401']).toBe(2);
    expect(byKey['…1111']).toBeGreaterThanOrEqual(11);
    expect(byKey['…3333']).toBeGreaterThanOrEqual(11);
    const keys = c.health()[0]?.keys;
    expect(keys).toMatchObject({ total: 3, healthy: 2, cooling: 0, revoked: 1 });
    // Each key by its short hash, never the key, in configuration order.
    expect(keys?.list.map((k) => k.state)).toEqual(['healthy', 'revoked', 'healthy']);
    expect(keys?.list.every((k) => /^[0-9a-f]{8}$/.test(k.id))).toBe(true);
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
    expect(logged).toContain('upstream API key set aside');
    expect(logged).toContain('GET /models with it answered 401');
    expect(logged).toMatch(/"keyId":"[0-9a-f]{8}"/);
    expect(logged).not.toContain('sk-secret');
  });

  it('keeps a key in rotation when only a model it may not use is refused, and fails those requests alone', async () => {
    const primary = await sim({ refusedModels: [{ key: 'sk-a-aaaa', model: 'gpt-forbidden' }] });
    const c = chain([provider('primary', primary.url, { apiKeys: ['sk-a-aaaa'] })]);
    const forbidden = (): ReturnType<typeof call> =>
      call({ requestedModel: 'gpt-forbidden', body: { model: 'gpt-forbidden', messages: [{ role: 'user', content: 'x' }] } });
    const refusals = await Promise.all(Array.from({ length: 8 }, () => failureOf(c.call(forbidden()))));
    expect(refusals.map((e) => e.code)).toEqual(Array<string>(8).fill('invalid_request'));
    expect(refusals[0]?.message).toContain('the upstream refused the request: 403');
    expect(refusals[0]?.message).toContain('gpt-forbidden');
    // One probe for the whole burst (its verdict is shared and kept for a while).
    expect(primary.stats().byPath['/v1/models']).toBe(1);
    expect(c.health()[0]).toMatchObject({ circuit: 'closed', available: true, keys: { healthy: 1, revoked: 0 } });
    expect(await c.call(call())).toMatchObject({ provider: 'primary', attempts: 1 });
  });

  it('tries a key set aside again once its set-aside time has passed', async () => {
    const primary = await sim({ revokedKeys: ['sk-b-bbbb'] });
    const c = chain([provider('primary', primary.url, { apiKeys: ['sk-a-aaaa', 'sk-b-bbbb'] })], { keySetAsideMs: 300 });
    await c.call(call());
    await c.call(call());
    expect(c.health()[0]?.keys.list.map((k) => k.state)).toEqual(['healthy', 'revoked']);
    await waitUntil(() => c.health()[0]?.keys.revoked === 0, 2000);
    primary.setOptions({ revokedKeys: [] });
    await c.call(call());
    await c.call(call());
    expect(
      primary.requests
        .slice(-2)
        .map((r) => r.headers['authorization'])
        .sort(),
    ).toEqual(['Bearer sk-a-aaaa', 'Bearer sk-b-bbbb']);
  });

  it('sets a key aside after refusals for several models when the probe cannot tell (no GET /models)', async () => {
    const up = await refusingUpstream('sk-bad-0001');
    const c = chain([provider('primary', up.url, { apiKeys: ['sk-bad-0001', 'sk-good-002'] })]);
    const named = (model: string): ReturnType<typeof call> => call({ body: { model, messages: [{ role: 'user', content: 'x' }] } });
    // Each refused call moves on to the good key: the refusal may be about the key.
    for (const model of ['m-1', 'm-1', 'm-2']) {
      expect(await c.call(named(model))).toBeDefined();
      expect(c.health()[0]?.keys.revoked).toBe(0);
    }
    for (let i = 0; i < 4 && c.health()[0]?.keys.revoked === 0; i += 1) await c.call(named('m-3'));
    expect(c.health()[0]?.keys.list.map((k) => k.state)).toEqual(['revoked', 'healthy']);
  });

  it('sets a key aside when the probe cannot tell but the key is refused a model it answered before', async () => {
    const up = await refusingUpstream();
    const c = chain([provider('primary', up.url, { apiKeys: ['sk-one-0001', 'sk-two-0002'] })]);
    await c.call(call());
    await c.call(call());
    up.refused.add('sk-one-0001');
    await c.call(call());
    await c.call(call());
    expect(c.health()[0]?.keys.list.map((k) => k.state)).toEqual(['revoked', 'healthy']);
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
    expect(primary.requests.map((r) => r.headers['authorization'])).toEqual(['Bearer sk-a-aaaa', ...Array<string>(7).fill('Bearer sk-b-bbbb')]);
    expect(c.health()[0]?.keys).toMatchObject({ total: 2, healthy: 1, cooling: 1, revoked: 0 });
    expect(c.health()[0]?.keys.list.map((k) => k.state)).toEqual(['cooling', 'healthy']);
  });

  it("moves to the fallback when the primary's only key is rate-limited, without pausing the fleet", async () => {
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
