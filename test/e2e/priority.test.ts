import { afterEach, describe, expect, it } from 'vitest';
import type { Reply } from '../../bridge/contract.js';
import { ask, sleep, startHarness, type Harness } from '../helpers/harness.js';

/** The order in which the upstream was asked, read from the request ids echoed in the prompts. */
const upstreamOrder = (h: Harness): string[] =>
  h.upstream.requests.map((r) => {
    const body = r.body as { messages: Array<{ content: string }> };
    return (body.messages[0]?.content ?? '').replace('question ', '');
  });

describe('scheduling by priority with aging', () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it('runs queued critical requests before earlier-queued low ones', async () => {
    h = await startHarness({ MAX_CONCURRENCY: '1' }, { latencyMs: 100 });
    const d = await h.device('line-1');
    await d.publish('normal', ask('first'));
    await sleep(30); // `first` is in flight; everything below queues behind it
    for (const id of ['low-1', 'low-2', 'low-3']) await d.publish('low', ask(id));
    for (const id of ['crit-1', 'crit-2']) await d.publish('critical', ask(id));
    await d.reply('low-3', { timeoutMs: 5000 });

    expect(upstreamOrder(h)).toEqual(['first', 'crit-1', 'crit-2', 'low-1', 'low-2', 'low-3']);
  });

  it('still completes a low request while critical load saturates the bridge (aging)', async () => {
    // Offsets shrunk so aging shows within a test: low waits at most 300 ms behind critical.
    h = await startHarness(
      { MAX_CONCURRENCY: '1', PRIORITY_OFFSETS_MS: 'critical=0,high=100,normal=200,low=300', DEVICE_RATE_LIMIT_RPM: '10000' },
      { latencyMs: 20 },
    );
    const d = await h.device('line-2');
    let seq = 0;
    let flooding = true;
    const sentAt = new Map<string, number>();
    // Critical requests arrive faster than the upstream answers them, for as long as the test runs.
    const flood = (async () => {
      while (flooding) {
        const id = `crit-${seq++}`;
        sentAt.set(id, Date.now());
        await d.publish('critical', ask(id), 0);
        await sleep(5);
      }
    })();
    await sleep(100);
    const lowSentAt = Date.now();
    await d.publish('low', ask('low-1'));
    let reply: Reply | undefined;
    let criticalWaiting = 0;
    try {
      [reply] = await d.reply('low-1', { timeoutMs: 5000 });
      criticalWaiting = (await h.bridge.store.queueDepth()).critical;
    } finally {
      flooding = false;
      await flood;
    }
    expect(reply).toMatchObject({ ok: true });
    // Everything the upstream saw before `low` was critical work that arrived no later than
    // 300 ms (its offset) after it, plus a little for the trip; later critical work queued behind it.
    const order = upstreamOrder(h);
    const lowAt = order.indexOf('low-1');
    expect(lowAt).toBeGreaterThan(0);
    for (const id of order.slice(0, lowAt)) expect(sentAt.get(id) ?? 0).toBeLessThanOrEqual(lowSentAt + 350);
    // The bridge was saturated: critical work was still waiting when `low` was answered.
    expect(criticalWaiting).toBeGreaterThan(0);
  });
});
