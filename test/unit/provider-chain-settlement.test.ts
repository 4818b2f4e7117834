// What each upstream attempt may have cost the upstream (attempt-spend.ts), as the chain reports
// it to afterAttempt: the scheduler settles each attempt's RATE_LIMIT_TPM reservation by it.
import { afterEach, describe, expect, it } from 'vitest';
import { attemptSpend, neverConnected, type AttemptSpend } from '../../bridge/upstream/attempt-spend.js';
import type { Outcome } from '../../bridge/upstream/outcome.js';
import type { UpstreamCall } from '../../bridge/upstream/call.js';
import { call, chain, closeChainsAndSims, closedPortUrl, failureOf, provider, sim } from '../helpers/provider-chain.js';

afterEach(closeChainsAndSims);

describe('attemptSpend', () => {
  const cases: Array<[string, Outcome, AttemptSpend]> = [
    ['an answer', { kind: 'ok', completion: { model: 'm', content: '', finish_reason: 'stop' }, ms: 1 }, 'usage'],
    ['a 429', { kind: 'rate_limited', retryAfterMs: 1000, message: '' }, 'nothing'],
    ['a 429 insufficient_quota', { kind: 'bad_key', status: 429, message: '' }, 'nothing'],
    ['a 401/403', { kind: 'key_refused', status: 403, message: '' }, 'nothing'],
    ['a 400', { kind: 'invalid', status: 400, message: '' }, 'nothing'],
    ['a request that cannot be sent', { kind: 'invalid', message: '' }, 'nothing'],
    ['a 409', { kind: 'fatal', status: 409, message: '' }, 'nothing'],
    ['a 500', { kind: 'retry', timeout: false, status: 500, message: '' }, 'nothing'],
    ['a connection refused', { kind: 'retry', timeout: false, unsent: true, message: '' }, 'nothing'],
    ['a timeout', { kind: 'retry', timeout: true, message: '' }, 'estimate'],
    ['a connection broken after sending', { kind: 'retry', timeout: false, message: '' }, 'estimate'],
    ['an unusable 200 (a stream broken midway)', { kind: 'retry', timeout: false, status: 200, message: '' }, 'estimate'],
  ];
  it.each(cases)('%s', (_what, outcome, spent) => {
    expect(attemptSpend(outcome)).toBe(spent);
  });

  it('reads a network error as never connected only for failures to connect', () => {
    expect(['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH'].map(neverConnected)).toEqual([true, true, true]);
    expect(['ECONNRESET', 'UND_ERR_SOCKET', undefined].map(neverConnected)).toEqual([false, false, false]);
  });
});

/** The call with an afterAttempt that records what each attempt spent. */
function recorded(extra: Partial<UpstreamCall> = {}): { req: UpstreamCall; spends: AttemptSpend[] } {
  const spends: AttemptSpend[] = [];
  return { req: call({ ...extra, afterAttempt: (spent) => spends.push(spent) }), spends };
}

describe('ProviderChain: afterAttempt per attempt', () => {
  it('a 429 on one key, then an answer on the other', async () => {
    const up = await sim();
    up.script({ status: 429, retryAfterS: 30 });
    const c = chain([provider('primary', up.url, { apiKeys: ['sk-a-0001', 'sk-b-0002'] })]);
    const { req, spends } = recorded();
    await c.call(req);
    expect(spends).toEqual(['nothing', 'usage']);
  });

  it('a connection refused, then the fallback answers', async () => {
    const fallback = await sim();
    const c = chain([provider('primary', await closedPortUrl()), provider('fallback', fallback.url)]);
    const { req, spends } = recorded();
    await c.call(req);
    expect(spends).toEqual(['nothing', 'usage']);
  });

  it('a 500, then a timeout: read per attempt, not from the final error', async () => {
    const up = await sim();
    up.script({ status: 500 }, { hang: true });
    const c = chain([provider('primary', up.url, { timeoutMs: 200 })], { maxAttempts: 2, breaker: undefined });
    const { req, spends } = recorded();
    expect((await failureOf(c.call(req))).code).toBe('upstream_error');
    expect(spends).toEqual(['nothing', 'estimate']);
  });

  it('a stream broken midway keeps its estimate; the retry answers', async () => {
    const up = await sim();
    up.script({ streamBreak: { after: 2, then: 'drop' } });
    const c = chain([provider('primary', up.url)], { breaker: undefined });
    const { req, spends } = recorded({ stream: { delta: () => undefined, reset: () => undefined } });
    await c.call(req);
    expect(spends).toEqual(['estimate', 'usage']);
  });

  it('a 400 about the request: one attempt, nothing spent', async () => {
    const up = await sim();
    up.script({ status: 400 });
    const c = chain([provider('primary', up.url)]);
    const { req, spends } = recorded();
    expect((await failureOf(c.call(req))).code).toBe('invalid_request');
    expect(spends).toEqual(['nothing']);
  });
});
