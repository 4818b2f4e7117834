import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../bridge/store/memory.js';
import { ask, BROKER_MODES, sleep, startHarness, type Harness } from '../helpers/harness.js';
import { waitUntil } from '../helpers/wait.js';

describe.each(BROKER_MODES)('request path (device → %s broker → bridge → upstream → reply)', (mode) => {
  let h: Harness;
  beforeEach(async () => {
    h = await startHarness({}, {}, undefined, { mode });
  });
  afterEach(async () => {
    await h.close();
  });

  it('answers a QoS 1 request on the device result topic with the upstream content', async () => {
    const device = await h.device('cam-1');
    await device.publish('high', ask('r-1', 'Is there a scratch on this part?', { max_tokens: 64, temperature: 0.2 }));
    const [reply] = await device.reply('r-1');

    expect(reply).toMatchObject({ id: 'r-1', ok: true, priority: 'high', attempts: 1, cached: false });
    if (!reply?.ok) throw new Error('expected ok');
    expect(reply.content).toBe('sim answer to: Is there a scratch on this part?');
    expect(reply.model).toBe('gpt-4o-mini');
    // The simulator counts a token per 4 characters of the prompt and of its answer.
    const question = 'Is there a scratch on this part?';
    const answer = `sim answer to: ${question}`;
    const prompt = Math.ceil(question.length / 4);
    const completion = Math.ceil(answer.length / 4);
    expect(reply.usage).toEqual({ prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion });
    expect(reply.timing.total_ms).toBeGreaterThanOrEqual(reply.timing.upstream_ms);

    expect(h.upstream.requests).toHaveLength(1);
    const seen = h.upstream.requests[0];
    expect(seen?.path).toBe('/v1/chat/completions');
    expect(seen?.body).toEqual({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Is there a scratch on this part?' }],
      max_tokens: 64,
      temperature: 0.2,
    });
  });

  it('accepts QoS 0 and QoS 2 requests and two connections of one device', async () => {
    const sub = await h.device('cam-2.sub');
    const pub = await h.device('cam-2.pub');
    await pub.publish('normal', ask('q0'), 0);
    await pub.publish('low', ask('q2'), 2);
    expect((await sub.reply('q0'))[0]?.ok).toBe(true);
    expect((await sub.reply('q2'))[0]).toMatchObject({ ok: true, priority: 'low' });
  });

  it('sends X-Lock-Key and a rising X-Lock-Fence for requests that name a lock', async () => {
    const device = await h.device('arm-1');
    await device.publish('normal', ask('l1', 'a', { lock: 'line-3/robot-arm' }));
    await device.reply('l1');
    await device.publish('normal', ask('l2', 'b', { lock: 'line-3/robot-arm' }));
    await device.reply('l2');
    const fences = h.upstream.requests.map((r) => [r.headers['x-lock-key'], Number(r.headers['x-lock-fence'])]);
    expect(fences).toEqual([
      ['line-3/robot-arm', 1],
      ['line-3/robot-arm', 2],
    ]);
  });

  it('never calls the upstream twice for one (deviceId, id) and republishes the stored reply', async () => {
    h.upstream.script({ delayMs: 300 });
    const device = await h.device('cam-3');
    await device.publish('normal', ask('dup', 'first'));
    await device.publish('normal', ask('dup', 'second payload, same id'));
    const [first] = await device.reply('dup');
    await device.publish('high', ask('dup', 'third, after the answer'));
    const replies = await device.reply('dup', { count: 2 });

    expect(h.upstream.requests).toHaveLength(1);
    expect(replies[1]).toEqual(first);
    if (!first?.ok) throw new Error('expected ok');
    expect(first.content).toBe('sim answer to: first');
  });

  it('keeps ids of different devices apart', async () => {
    const a = await h.device('dev-a');
    const b = await h.device('dev-b');
    await a.publish('normal', ask('same', 'from a'));
    await b.publish('normal', ask('same', 'from b'));
    const [ra] = await a.reply('same');
    const [rb] = await b.reply('same');
    expect(ra?.ok && ra.content).toBe('sim answer to: from a');
    expect(rb?.ok && rb.content).toBe('sim answer to: from b');
    expect(h.upstream.requests).toHaveLength(2);
  });
});

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
