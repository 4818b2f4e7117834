// The request path with the store replaced by a spy or slowed down: how the bridge dispatches,
// fills its slots and acknowledges, on the embedded broker. What a device sees of it, over both
// broker modes, is test/helpers/device-suite.ts.
import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../bridge/store/memory.js';
import { ask, sleep, startHarness } from '../helpers/harness.js';
import { waitUntil } from '../helpers/wait.js';

describe('dispatch', () => {
  it('claims a request reaching an idle instance in the store call that admits it', async () => {
    const store = new MemoryStore();
    const admit = store.queue.admit.bind(store.queue);
    const claimedAlong: string[][] = [];
    store.queue.admit = async (...args) => {
      const result = await admit(...args);
      if (result.kind === 'queued') claimedAlong.push((result.along?.claim.jobs ?? []).map((j) => j.id));
      return result;
    };
    const harness = await startHarness({}, {}, store);
    try {
      const device = await harness.device('cam-idle');
      for (const id of ['one', 'two', 'three']) {
        await device.publish('normal', ask(id));
        const [reply] = await device.reply(id);
        expect(reply).toMatchObject({ id, ok: true });
      }
      expect(claimedAlong).toEqual([['one'], ['two'], ['three']]);
      expect(harness.upstream.requests.map((r) => (r.body as { messages: { content: string }[] }).messages[0]?.content)).toEqual([
        'question one',
        'question two',
        'question three',
      ]);
    } finally {
      await harness.close();
    }
  });

  it('still answers every request when all slots are busy and admissions carry no claim', async () => {
    const harness = await startHarness({ MAX_CONCURRENCY: '2' }, { latencyMs: 30 });
    try {
      const device = await harness.device('cam-busy');
      const ids = Array.from({ length: 12 }, (_, i) => `b${i}`);
      await Promise.all(ids.map((id) => device.publish('normal', ask(id))));
      for (const id of ids) expect((await device.reply(id, { timeoutMs: 5000 }))[0]).toMatchObject({ id, ok: true });
      expect(harness.upstream.requests).toHaveLength(12);
    } finally {
      await harness.close();
    }
  });
});

describe('slots', () => {
  it('never starts more than MAX_CONCURRENCY jobs, even while a claim is on its way back', async () => {
    // Claims whose answer takes 300 ms to come back, as from a distant Redis: an admission
    // arriving meanwhile must not take the slot that claim is about to fill.
    const store = new MemoryStore();
    const claim = store.queue.claim.bind(store.queue);
    store.queue.claim = async (...args) => {
      const result = await claim(...args);
      if (result.jobs.length > 0) await sleep(300);
      return result;
    };
    const harness = await startHarness({ MAX_CONCURRENCY: '2' }, { latencyMs: 2000 }, store);
    try {
      const device = await harness.device('cam-slots');
      harness.upstream.script({ delayMs: 200 }); // `a` ends first, freeing one slot
      for (const id of ['a', 'b']) await device.publish('normal', ask(id)); // each claimed along
      await device.publish('normal', ask('c')); // no free slot: queued
      await device.publish('normal', ask('d', 'q', { ttl_ms: 700 })); // waits for `b`: expires
      // `a` ended: the pump claims `c` for its slot, and that claim is on its way back when
      // `e` arrives. Taking that slot too, `e`'s admission would start `d` as a third job.
      expect(await waitUntil(() => harness.upstream.requests[0]?.answeredAt !== undefined, 5000)).toBe(true);
      await sleep(50);
      await device.publish('normal', ask('e'));
      expect((await device.reply('d', { timeoutMs: 5000 }))[0]).toMatchObject({ id: 'd', ok: false, error: { code: 'expired' } });
      for (const id of ['a', 'b', 'c', 'e']) expect((await device.reply(id, { timeoutMs: 10_000 }))[0]).toMatchObject({ id, ok: true });
      const asked = harness.upstream.requests.map((r) => JSON.stringify(r.body));
      expect(asked.some((b) => b.includes('question d'))).toBe(false);
    } finally {
      await harness.close();
    }
  });
});

describe('acknowledgement', () => {
  it('sends PUBACK (QoS 1) and PUBREC (QoS 2) only after the request was admitted', async () => {
    // A store whose admission takes 300 ms: an acknowledgement sent before admission would
    // reach the device long before the request is in the queue.
    const store = new MemoryStore();
    const admit = store.queue.admit.bind(store.queue);
    store.queue.admit = async (...args) => {
      await sleep(300);
      return admit(...args);
    };
    const slow = await startHarness({ MAX_CONCURRENCY: '1' }, { latencyMs: 2000 }, store);
    try {
      const device = await slow.device('cam-ack');
      await device.publish('normal', ask('busy'), 1);
      await slow.upstream.requested(1); // `busy` holds the only slot
      for (const qos of [1, 2] as const) {
        const sentAt = Date.now();
        await device.publish('low', ask(`acked-qos${qos}`), qos);
        expect(Date.now() - sentAt).toBeGreaterThanOrEqual(290);
        expect((await store.operations.queueDepth()).low).toBe(qos);
      }
    } finally {
      await slow.close();
    }
  });
});
