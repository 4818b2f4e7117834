// Upstream faults end to end: a real bridge against the upstream simulator, with scripted
// 5xx, 4xx, 429 (Retry-After), hangs and slow answers. Every test checks both sides: what the
// device was told on its result topic and what the upstream actually received.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Reply } from '../../contract/index.js';
import { barrier, callsBeforeBarrier } from '../helpers/barrier.js';
import { ask, startHarness, type Harness } from '../helpers/harness.js';
import { eventually, quietFor } from '../helpers/wait.js';

/** Polls until `predicate` holds; fails with `what` after `timeoutMs`. */
const waitFor = (predicate: () => boolean, what: string, timeoutMs = 3000): Promise<void> => eventually(what, predicate, timeoutMs);

function expectError(reply: Reply | undefined, code: string): { code: string; message: string; retry_after_ms?: number } {
  expect(reply).toBeDefined();
  if (reply === undefined || reply.ok) throw new Error(`expected an error reply with ${code}, got ${JSON.stringify(reply)}`);
  expect(reply.error.code).toBe(code);
  return reply.error;
}

describe('upstream faults (device ↔ bridge ↔ upstream simulator)', () => {
  let h: Harness | undefined;
  const start = async (env: Record<string, string> = {}): Promise<Harness> => {
    h = await startHarness(env);
    return h;
  };
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('retries 500, 500 and answers ok on the third attempt with identical bodies', async () => {
    const h = await start({ MAX_ATTEMPTS: '3' });
    h.upstream.script({ status: 500 }, { status: 500 });
    const device = await h.device('cam-5xx');
    await device.publish('high', ask('r-500-500-ok', 'check weld', { max_tokens: 32, temperature: 0 }));
    const [reply] = await device.reply('r-500-500-ok');

    expect(reply).toMatchObject({ id: 'r-500-500-ok', ok: true, attempts: 3, priority: 'high', cached: false });
    if (!reply?.ok) throw new Error('expected ok');
    expect(reply.content).toBe('sim answer to: check weld');

    await barrier(device, 'high');
    const seen = callsBeforeBarrier(h.upstream);
    expect(seen).toHaveLength(3);
    expect(h.upstream.stats().byStatus).toMatchObject({ '500': 2, '200': 2 }); // and the barrier's
    const expected = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'check weld' }], max_tokens: 32, temperature: 0 };
    for (const r of seen) expect(r.body).toEqual(expected);
  });

  it('fails with upstream_error after exactly MAX_ATTEMPTS calls when the upstream always answers 500', async () => {
    const h = await start({ MAX_ATTEMPTS: '3' });
    h.upstream.setOptions({ errorRate: 1 });
    const device = await h.device('cam-down');
    await device.publish('low', ask('r-always-500'));
    const [reply] = await device.reply('r-always-500');

    const error = expectError(reply, 'upstream_error');
    expect(reply).toMatchObject({ id: 'r-always-500', priority: 'low' });
    expect(error.message).toMatch(/\b500\b/);
    expect(error.message).toMatch(/3 attempts/);

    h.upstream.setOptions({ errorRate: 0 }); // the barrier is answered
    await barrier(device, 'low');
    expect(callsBeforeBarrier(h.upstream)).toHaveLength(3);
    expect(h.upstream.stats().byStatus).toEqual({ '500': 3, '200': 1 }); // and the barrier's
  });

  it('honours Retry-After on a 429 without using an attempt, and pauses the whole upstream meanwhile', async () => {
    const h = await start({ MAX_ATTEMPTS: '3' });
    h.upstream.script({ status: 429, retryAfterS: 1 });
    const first = await h.device('cam-a');
    const second = await h.device('cam-b');

    const pause = vi.spyOn(h.bridge.store.limits, 'pauseUpstream');
    await first.publish('critical', ask('r-429', 'first'));
    // The 429 is answered at once; once the bridge has read it and paused, a second device asks
    // while the pause runs.
    await waitFor(() => pause.mock.calls.length > 0, 'the pause after the 429');
    const secondSentAt = Date.now();
    await second.publish('critical', ask('r-during-pause', 'second'));

    const [reply] = await first.reply('r-429', { timeoutMs: 3000 });
    const [other] = await second.reply('r-during-pause', { timeoutMs: 3000 });
    expect(reply).toMatchObject({ id: 'r-429', ok: true, attempts: 1, priority: 'critical' });
    expect(other).toMatchObject({ id: 'r-during-pause', ok: true, attempts: 1 });

    await barrier(first, 'critical');
    const seen = callsBeforeBarrier(h.upstream);
    expect(seen).toHaveLength(3);
    const content = (i: number): unknown => (seen[i]?.body as { messages: { content: string }[] }).messages[0]?.content;
    const t0 = seen[0]?.at as number;
    expect(content(0)).toBe('first');
    const retry = seen.findIndex((_, i) => i > 0 && content(i) === 'first');
    const secondCall = seen.findIndex((_, i) => content(i) === 'second');
    expect(retry).toBeGreaterThan(0);
    expect(secondCall).toBeGreaterThan(0);
    // The retry waited for Retry-After ...
    expect((seen[retry]?.at as number) - t0).toBeGreaterThanOrEqual(900);
    // ... and so did the other device's request, although it was sent well inside the pause.
    expect(secondSentAt - t0).toBeLessThan(500);
    expect((seen[secondCall]?.at as number) - t0).toBeGreaterThanOrEqual(900);
    expect(h.upstream.stats().byStatus).toEqual({ '429': 1, '200': 3 }); // and the barrier's
  });

  it('gives up with upstream_error after more than MAX_RATE_LIMITED_RETRIES 429s', async () => {
    const h = await start({ MAX_RATE_LIMITED_RETRIES: '1', MAX_ATTEMPTS: '3' });
    // A third call, if one were made, would be answered 200 and the test would see `ok`.
    h.upstream.script({ status: 429, retryAfterS: 0 }, { status: 429, retryAfterS: 0 });
    const device = await h.device('cam-429');
    await device.publish('normal', ask('r-429-429'));
    const [reply] = await device.reply('r-429-429');

    const error = expectError(reply, 'upstream_error');
    expect(reply).toMatchObject({ priority: 'normal' });
    expect(error.message).toMatch(/429/);

    await barrier(device, 'normal');
    expect(callsBeforeBarrier(h.upstream)).toHaveLength(2);
    expect(h.upstream.stats().byStatus).toEqual({ '429': 2, '200': 1 }); // and the barrier's
  });

  it('answers upstream_timeout after MAX_ATTEMPTS hanging calls of UPSTREAM_TIMEOUT_MS each', async () => {
    const h = await start({ UPSTREAM_TIMEOUT_MS: '300', MAX_ATTEMPTS: '2' });
    h.upstream.script({ hang: true }, { hang: true });
    const device = await h.device('cam-hang');
    const sentAt = Date.now();
    await device.publish('high', ask('r-hang'));
    const [reply] = await device.reply('r-hang', { timeoutMs: 3000 });
    const elapsed = Date.now() - sentAt;

    const error = expectError(reply, 'upstream_timeout');
    expect(reply).toMatchObject({ priority: 'high' });
    expect(error.message).toMatch(/300 ms/);
    // Two attempts of 300 ms plus at most one backoff (< 200 ms by default).
    expect(elapsed).toBeGreaterThanOrEqual(590);
    expect(elapsed).toBeLessThan(2000);

    await barrier(device, 'high');
    expect(callsBeforeBarrier(h.upstream)).toHaveLength(2);
    expect(h.upstream.stats().byStatus).toEqual({ hang: 2, '200': 1 }); // and the barrier's
    expect((h.upstream.requests[1]?.at as number) - (h.upstream.requests[0]?.at as number)).toBeGreaterThanOrEqual(290);
  });

  it('fails at once with invalid_request on a 400, without retrying', async () => {
    const h = await start({ MAX_ATTEMPTS: '3' });
    h.upstream.script({ status: 400 });
    const device = await h.device('cam-400');
    await device.publish('normal', ask('r-400'));
    const [reply] = await device.reply('r-400');

    const error = expectError(reply, 'invalid_request');
    expect(error.message).toMatch(/^the upstream refused the request: 400 /);
    expect(reply).toMatchObject({ priority: 'normal' });

    await barrier(device, 'normal');
    expect(callsBeforeBarrier(h.upstream)).toHaveLength(1);
    expect(h.upstream.stats().byStatus).toEqual({ '400': 1, '200': 1 }); // and the barrier's
  });

  it('answers expired at once when a 429 asks for a wait longer than the ttl_ms left', async () => {
    const h = await start();
    h.upstream.script({ status: 429, retryAfterS: 2 });
    const device = await h.device('cam-ttl');
    const sentAt = Date.now();
    await device.publish('critical', ask('r-ttl', 'hurry', { ttl_ms: 500 }));
    const [reply] = await device.reply('r-ttl', { timeoutMs: 3000 });
    const elapsed = Date.now() - sentAt;

    // The client fails fast: it does not sleep past the deadline only to give up then.
    const error = expectError(reply, 'expired');
    expect(reply).toMatchObject({ priority: 'critical' });
    expect(error.message).toMatch(/429/);
    expect(error.retry_after_ms).toBe(2000);
    expect(elapsed).toBeLessThan(500);

    await barrier(device, 'critical');
    expect(callsBeforeBarrier(h.upstream)).toHaveLength(1);
    expect(h.upstream.stats().byStatus).toEqual({ '429': 1, '200': 1 }); // and the barrier's
  });

  it('holds RATE_LIMIT_RPM in a rolling window, and answers the held request unavailable at shutdown', async () => {
    const h = await start({ RATE_LIMIT_RPM: '2' });
    const device = await h.device('cam-rpm');
    const sentAt = Date.now();
    for (const id of ['r-1', 'r-2', 'r-3']) await device.publish('normal', ask(id));
    await device.reply('r-1');
    await device.reply('r-2');

    // No barrier: the window holds whatever comes after r-3 too. Unheld, r-3's call would be here by now.
    await quietFor(500);
    expect(h.upstream.requests).toHaveLength(2);
    for (const r of h.upstream.requests) expect(r.at - sentAt).toBeLessThan(300);
    expect(device.replies.map((r) => r.id)).toEqual(['r-1', 'r-2']);
    expect(device.replies.every((r) => r.ok)).toBe(true);

    // Shut the bridge down while the device is still connected: the queued request is answered.
    await h.bridge.shutdown();
    const [held] = await device.reply('r-3', { timeoutMs: 2000 });
    expectError(held, 'unavailable');
    expect(held).toMatchObject({ priority: 'normal' });
    expect(h.upstream.requests).toHaveLength(2);
  });

  it('reports timing.upstream_ms covering the upstream latency', async () => {
    const h = await start();
    h.upstream.script({ delayMs: 200 });
    const device = await h.device('cam-slow');
    await device.publish('normal', ask('r-slow'));
    const [reply] = await device.reply('r-slow');

    if (!reply?.ok) throw new Error(`expected ok, got ${JSON.stringify(reply)}`);
    expect(reply.attempts).toBe(1);
    expect(reply.timing.upstream_ms).toBeGreaterThanOrEqual(200);
    expect(reply.timing.upstream_ms).toBeLessThan(1000);
    expect(reply.timing.total_ms).toBeGreaterThanOrEqual(reply.timing.upstream_ms);
    expect(h.upstream.requests).toHaveLength(1);
  });
});
