// The provider chain against real HTTP upstreams (the upstream simulator on free ports): key
// rotation, refused keys and rate-limited ones.
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../bridge/logger.js';
import { logSink } from '../helpers/log-sink.js';
import {
  call,
  chain,
  closeChainsAndSims,
  provider,
  sim,
} from '../helpers/provider-chain.js';

afterEach(closeChainsAndSims);

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
    expect(c.health()[0]?.keys).toMatchObject({ total: 2, healthy: 1, cooling: 1, revoked: 0 });
    expect(c.health()[0]?.keys.list.map((k) => k.state)).toEqual(['cooling', 'healthy']);
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
