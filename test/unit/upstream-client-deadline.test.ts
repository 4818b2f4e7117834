// The upstream client against a scripted HTTP upstream: deadlines, beforeAttempt, the abort
// signal, close, and what it logs.
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../bridge/logger.js';
import { logSink } from '../helpers/log-sink.js';
import { failureOf } from '../helpers/provider-chain.js';
import { call, client, closeClientsAndUpstreams, failure, scripted } from '../helpers/scripted-upstream.js';

afterEach(closeClientsAndUpstreams);

describe('UpstreamClient', () => {
  describe('deadline', () => {
    it('is expired when the deadline has already passed: nothing is sent', async () => {
      const up = await scripted([{}]);
      const err = await failureOf(client(up.url).call(call({ deadline: Date.now() - 1 })));
      expect(err.code).toBe('expired');
      expect(err.message).toContain('ttl_ms passed before an upstream call could start');
      expect(up.seen).toHaveLength(0);
    });

    it('is expired when a 429 wait would pass it, without sleeping', async () => {
      const up = await scripted([failure(429, 'slow down', { headers: { 'retry-after': '1' } }), {}]);
      const started = Date.now();
      const err = await failureOf(client(up.url).call(call({ deadline: Date.now() + 300 })));
      expect(err.code).toBe('expired');
      expect(err.retryAfterMs).toBe(1000);
      expect(Date.now() - started).toBeLessThan(250);
      expect(up.seen).toHaveLength(1);
    });

    it('is expired when a 429 backoff (no Retry-After) would pass it', async () => {
      const up = await scripted([failure(429, 'slow down'), {}]);
      const c = client(up.url, { backoff: { baseMs: 1000, maxMs: 1000 }, random: () => 1 });
      const err = await failureOf(c.call(call({ deadline: Date.now() + 300 })));
      expect(err.code).toBe('expired');
      expect(up.seen).toHaveLength(1);
    });

    it('gives the last failure code once an attempt has run', async () => {
      const up = await scripted([failure(500, 'boom'), {}]);
      const c = client(up.url, { backoff: { baseMs: 1000, maxMs: 1000 }, random: () => 1 });
      const started = Date.now();
      const err = await failureOf(c.call(call({ deadline: Date.now() + 300 })));
      expect(err.code).toBe('upstream_error');
      expect(err.message).toContain('500');
      expect(Date.now() - started).toBeLessThan(250);
      expect(up.seen).toHaveLength(1);
    });

    it('gives upstream_timeout when the attempts that ran all timed out', async () => {
      const up = await scripted([{ hang: true }]);
      const c = client(up.url, { timeoutMs: 100, backoff: { baseMs: 1000, maxMs: 1000 }, random: () => 1 });
      const err = await failureOf(c.call(call({ deadline: Date.now() + 500 })));
      expect(err.code).toBe('upstream_timeout');
      expect(up.seen).toHaveLength(1);
    });

    it('checks again after beforeAttempt, which may have waited', async () => {
      const up = await scripted([{}]);
      const err = await failureOf(
        client(up.url).call(
          call({
            deadline: Date.now() + 50,
            beforeAttempt: () => new Promise((resolve) => setTimeout(resolve, 100)),
          }),
        ),
      );
      expect(err.code).toBe('expired');
      expect(up.seen).toHaveLength(0);
    });
  });

  it('stops and rethrows as is when beforeAttempt throws', async () => {
    const up = await scripted([failure(500, 'boom'), {}]);
    const lost = new Error('lock lease lost');
    const err = await client(up.url)
      .call(
        call({
          beforeAttempt: async (n) => {
            if (n === 2) throw lost;
          },
        }),
      )
      .catch((e: unknown) => e);
    expect(err).toBe(lost);
    expect(up.seen).toHaveLength(1);
  });

  describe('abort signal', () => {
    it('aborts an attempt in flight with unavailable', async () => {
      const up = await scripted([{ hang: true }]);
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 100);
      const started = Date.now();
      const err = await failureOf(client(up.url).call(call({ signal: controller.signal })));
      expect(err.code).toBe('unavailable');
      expect(err.message).toBe('bridge is shutting down');
      expect(Date.now() - started).toBeLessThan(1000);
      expect(up.seen).toHaveLength(1);
    });

    it('aborts a backoff sleep', async () => {
      const up = await scripted([failure(429, 'slow down', { headers: { 'retry-after': '10' } })]);
      const controller = new AbortController();
      const c = client(up.url);
      const started = Date.now();
      const pending = c.call(call({ signal: controller.signal, onRateLimited: () => setTimeout(() => controller.abort(), 100) }));
      const err = await failureOf(pending);
      expect(err.code).toBe('unavailable');
      expect(Date.now() - started).toBeLessThan(2000);
      expect(up.seen).toHaveLength(1);
    });

    it('sends nothing when already aborted', async () => {
      const up = await scripted([{}]);
      const err = await failureOf(client(up.url).call(call({ signal: AbortSignal.abort() })));
      expect(err.code).toBe('unavailable');
      expect(up.seen).toHaveLength(0);
    });
  });

  it('refuses calls after close()', async () => {
    const up = await scripted([{}]);
    const c = client(up.url);
    await c.close();
    const err = await failureOf(c.call(call()));
    expect(err.code).toBe('unavailable');
  });

  it('never logs an API key', async () => {
    const up = await scripted([failure(401, 'invalid api key'), failure(500, 'boom'), {}]);
    const sink = logSink();
    await client(up.url, { apiKeys: ['sk-secret-aaa', 'sk-secret-bbb'], logger: createLogger('debug', sink.stream) }).call(call());
    const logged = sink.text();
    expect(logged).toContain('upstream attempt');
    expect(logged).toContain('"reqId":"r-1"');
    expect(logged).not.toContain('sk-secret');
  });
});
