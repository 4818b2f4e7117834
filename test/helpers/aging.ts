// The aging check shared by the memory-store and Redis-store suites: critical requests flood a
// bridge with one upstream slot while one low request waits; aging must still run it.
import { expect } from 'vitest';
import type { Reply } from '../../contract/index.js';
import { ask, sleep, type Harness } from './harness.js';
import { readUntil } from './wait.js';

/** Offsets shrunk so aging shows within a test: low waits at most 300 ms behind critical. */
export const AGING_ENV = {
  MAX_CONCURRENCY: '1',
  PRIORITY_OFFSETS_MS: 'critical=0,high=100,normal=200,low=300',
  DEVICE_RATE_LIMIT_RPM: '10000',
};
const LOW_OFFSET_MS = 300;
/** The flood's pace: faster than one upstream slot answers. */
const FLOOD_EVERY_MS = 5;

/** The prompts the upstream was asked, in order, without their "question " prefix. */
export const upstreamOrder = (h: Pick<Harness, 'upstream'>): string[] =>
  h.upstream.requests.map((r) => {
    const body = r.body as { messages: Array<{ content: string }> };
    return (body.messages[0]?.content ?? '').replace('question ', '');
  });

/**
 * Floods `h` with critical requests, sends one low request, and asserts that it was answered,
 * that everything the upstream saw before it arrived no later than its offset (plus
 * `tripMs` for the way through the bridge) after it, and that the bridge was saturated.
 */
export async function expectLowRunsUnderCriticalFlood(h: Harness, tripMs: number): Promise<void> {
  const flooder = await h.device('line-2');
  // Its own connection, so the low request does not queue behind the flood on one socket.
  const asker = await h.device('line-2.low');
  let seq = 0;
  let flooding = true;
  const sentAt = new Map<string, number>();
  // Critical requests arrive faster than the upstream answers them, for as long as this runs.
  const flood = (async () => {
    while (flooding) {
      const id = `crit-${seq++}`;
      sentAt.set(id, Date.now());
      await flooder.publish('critical', ask(id), 0);
      await sleep(FLOOD_EVERY_MS);
    }
  })();
  let reply: Reply | undefined;
  let criticalWaiting: number;
  let lowSentAt: number;
  try {
    // The flood has built a backlog of critical work before `low` comes.
    const depth = () => h.bridge.store.operations.queueDepth();
    await readUntil(depth, (d) => d.critical > 0, 2000);
    lowSentAt = Date.now();
    await asker.publish('low', ask('low-1'));
    [reply] = await asker.reply('low-1', { timeoutMs: 5000 });
    criticalWaiting = (await h.bridge.store.operations.queueDepth()).critical;
  } finally {
    flooding = false;
    await flood;
  }
  expect(reply).toMatchObject({ ok: true });
  const order = upstreamOrder(h);
  const lowAt = order.indexOf('low-1');
  expect(lowAt).toBeGreaterThan(0);
  for (const id of order.slice(0, lowAt)) expect(sentAt.get(id) ?? 0).toBeLessThanOrEqual(lowSentAt + LOW_OFFSET_MS + tripMs);
  // Saturated: critical work was still waiting when `low` was answered.
  expect(criticalWaiting).toBeGreaterThan(0);
}
