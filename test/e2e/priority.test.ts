import { afterEach, describe, expect, it } from 'vitest';
import { AGING_ENV, expectLowRunsUnderCriticalFlood, upstreamOrder } from '../helpers/aging.js';
import { ask, startHarness, type Harness } from '../helpers/harness.js';

describe('scheduling by priority with aging', () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it('runs queued critical requests before earlier-queued low ones', async () => {
    h = await startHarness({ MAX_CONCURRENCY: '1' }, { latencyMs: 100 });
    const d = await h.device('line-1');
    await d.publish('normal', ask('first'));
    await h.upstream.requested(1); // `first` is in flight; everything below queues behind it
    for (const id of ['low-1', 'low-2', 'low-3']) await d.publish('low', ask(id));
    for (const id of ['crit-1', 'crit-2']) await d.publish('critical', ask(id));
    await d.reply('low-3', { timeoutMs: 5000 });

    expect(upstreamOrder(h)).toEqual(['first', 'crit-1', 'crit-2', 'low-1', 'low-2', 'low-3']);
  });

  it('still completes a low request while critical load saturates the bridge (aging)', async () => {
    h = await startHarness(AGING_ENV, { latencyMs: 20 });
    await expectLowRunsUnderCriticalFlood(h, 50);
  });
});
