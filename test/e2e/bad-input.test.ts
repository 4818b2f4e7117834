import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ask, BROKER_MODES, startHarness, type Device, type Harness } from '../helpers/harness.js';
import { waitUntil } from '../helpers/wait.js';

// Every rejection is a reply with a contract code, never silence, and never touches another
// device: with the embedded broker and with the plant's broker alike.
describe.each(BROKER_MODES)('bad input (%s broker)', (mode) => {
  let h: Harness;
  let bad: Device;
  let good: Device;
  let n = 0;
  beforeAll(async () => {
    h = await startHarness({ MAX_PAYLOAD_BYTES: '2048', DEVICE_RATE_LIMIT_RPM: '1000' }, {}, undefined, { mode });
    bad = await h.device('bad-1');
    good = await h.device('good-1');
  });
  afterAll(async () => {
    await h.close();
  });

  async function expectGoodDeviceStillServed(): Promise<void> {
    const id = `ok-${++n}`;
    await good.publish('normal', ask(id));
    const [reply] = await good.reply(id);
    expect(reply?.ok).toBe(true);
  }

  const cases: Array<{ name: string; priority: string; payload: unknown; id: string | null; code: string; message: RegExp }> = [
    { name: 'not JSON', priority: 'high', payload: '{"id": "x1", oops', id: null, code: 'invalid_request', message: /not valid JSON/ },
    { name: 'JSON but not an object', priority: 'high', payload: '[1,2,3]', id: null, code: 'invalid_request', message: /expected object/ },
    { name: 'missing messages', priority: 'high', payload: { id: 'x2' }, id: 'x2', code: 'invalid_request', message: /^messages:/ },
    { name: 'empty messages', priority: 'high', payload: { id: 'x3', messages: [] }, id: 'x3', code: 'invalid_request', message: /^messages:/ },
    { name: 'bad id characters', priority: 'high', payload: ask('has space'), id: 'has space', code: 'invalid_request', message: /^id:/ },
    { name: 'missing id', priority: 'high', payload: { messages: [{ role: 'user', content: 'x' }] }, id: null, code: 'invalid_request', message: /^id:/ },
    {
      name: 'wrong type of max_tokens',
      priority: 'high',
      payload: ask('x4', 'q', { max_tokens: 'many' }),
      id: 'x4',
      code: 'invalid_request',
      message: /^max_tokens:/,
    },
    { name: 'negative ttl_ms', priority: 'high', payload: ask('x5', 'q', { ttl_ms: -1 }), id: 'x5', code: 'invalid_request', message: /^ttl_ms:/ },
    { name: 'unknown priority', priority: 'urgent', payload: ask('x6'), id: 'x6', code: 'invalid_request', message: /unknown priority "urgent"/ },
    { name: 'oversized payload', priority: 'low', payload: ask('x7', 'y'.repeat(4096)), id: 'x7', code: 'payload_too_large', message: /MAX_PAYLOAD_BYTES/ },
  ];

  for (const c of cases) {
    it(`answers ${c.code} for ${c.name}, and the next device is served`, async () => {
      await bad.publish(c.priority, c.payload);
      const [reply] = await bad.reply(c.id);
      expect(reply).toMatchObject({ id: c.id, ok: false, error: { code: c.code } });
      if (reply?.ok !== false) throw new Error('expected an error reply');
      expect(reply.error.message).toMatch(c.message);
      bad.replies.length = 0;
      await expectGoodDeviceStillServed();
    });
  }

  it('answers expired when ttl_ms passes before the upstream call can start', async () => {
    // Long enough that no blocker ends (freeing a slot) before the short ttl has passed, even
    // when publishing the 32 blockers takes a loaded machine several hundred ms.
    h.upstream.setOptions({ latencyMs: 2000 });
    try {
      // One request per slot keeps the upstream busy; the short-ttl one waits behind them.
      const blockers = Array.from({ length: 32 }, (_, i) => `block-${i}`);
      const before = h.upstream.requests.length;
      await Promise.all(blockers.map((id) => bad.publish('critical', ask(id))));
      // The plant's broker acknowledges before the bridge has them (over several connections,
      // in any order): wait until every slot is busy upstream, or the short one may take one.
      expect(await waitUntil(() => h.upstream.requests.length >= before + blockers.length, 5000)).toBe(true);
      await bad.publish('low', ask('short-ttl', 'q', { ttl_ms: 100 }));
      const [reply] = await bad.reply('short-ttl');
      expect(reply).toMatchObject({ id: 'short-ttl', ok: false, priority: 'low', error: { code: 'expired' } });
      const asked = h.upstream.requests.map((r) => JSON.stringify(r.body));
      expect(asked.some((b) => b.includes('question short-ttl'))).toBe(false);
      await bad.reply('block-31');
    } finally {
      h.upstream.setOptions({ latencyMs: 5 });
    }
    await expectGoodDeviceStillServed();
  });
});

describe.each(BROKER_MODES)('device quota and queue limit (%s broker)', (mode) => {
  it('answers rate_limited with retry_after_ms once a device is over DEVICE_RATE_LIMIT_RPM', async () => {
    const h = await startHarness({ DEVICE_RATE_LIMIT_RPM: '3' }, {}, undefined, { mode });
    try {
      const d = await h.device('greedy');
      const other = await h.device('polite');
      // One after the other as the bridge sees them: the plant's broker acknowledges before
      // the bridge has a request, and may hand two in a row to different bridge connections.
      for (const id of ['a', 'b', 'c']) {
        await d.publish('normal', ask(id));
        await d.reply(id);
      }
      await d.publish('normal', ask('d'));
      const [over] = await d.reply('d');
      expect(over).toMatchObject({ ok: false, error: { code: 'rate_limited' } });
      if (over?.ok !== false) throw new Error('expected error');
      expect(over.error.message).toBe('device greedy is over 3 requests/min');
      expect(over.error.retry_after_ms).toBeGreaterThan(50_000);
      await other.publish('normal', ask('fine'));
      expect((await other.reply('fine'))[0]?.ok).toBe(true);
    } finally {
      await h.close();
    }
  });

  it('answers queue_full once QUEUE_MAX requests wait', async () => {
    const h = await startHarness({ QUEUE_MAX: '2', MAX_CONCURRENCY: '1' }, { latencyMs: 300 }, undefined, { mode });
    try {
      const d = await h.device('filler');
      await d.publish('normal', ask('running'));
      // It has left the queue for the upstream once the upstream has it.
      expect(await waitUntil(() => h.upstream.requests.length === 1, 3000)).toBe(true);
      for (const id of ['q1', 'q2', 'q3']) await d.publish('normal', ask(id));
      // Which of the three the bridge sees last is the plant broker's choice: that one is refused.
      const replies = await Promise.all(['q1', 'q2', 'q3'].map(async (id) => (await d.reply(id, { timeoutMs: 3000 }))[0]));
      expect(replies.map((r) => (r?.ok ? 'ok' : r?.error.code)).sort()).toEqual(['ok', 'ok', 'queue_full']);
      // When to try again, as the README says every queue_full does.
      expect(replies.find((r) => r?.ok === false)).toMatchObject({ error: { code: 'queue_full', retry_after_ms: 1000 } });
    } finally {
      await h.close();
    }
  });
});
