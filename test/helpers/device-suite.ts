// What a device can rely on, as one suite run over both broker modes (as MQTT.js runs one client
// suite over every transport): whether the devices connect to the bridge's embedded broker or to
// the plant's Mosquitto the bridge joined, the contract is the same. test/e2e/device-embedded and
// device-external call it, one mode each, so the modes run on separate workers; its MQTT 5 part is
// device-suite-mqtt5.ts. What only one broker does (PUBACK reason codes, the embedded broker's own
// refusals) stays in its own file.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AGING_ENV, expectLowRunsUnderCriticalFlood, upstreamOrder } from './aging.js';
import { ask, startHarness, type BrokerMode, type Device, type Harness } from './harness.js';
import { mqtt5Suite } from './device-suite-mqtt5.js';
import { readUntil } from './wait.js';

export function deviceSuite(mode: BrokerMode): void {
  const start = (env: Record<string, string> = {}, sim: Parameters<typeof startHarness>[1] = {}): Promise<Harness> =>
    startHarness(env, sim, undefined, { mode });

  describe(`device contract (${mode} broker)`, () => {
    describe('request and result', () => {
      let h: Harness;
      beforeEach(async () => {
        h = await start();
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
    });

    describe('duplicates and ids', () => {
      let h: Harness;
      beforeEach(async () => {
        h = await start();
      });
      afterEach(async () => {
        await h.close();
      });

      it('never calls the upstream twice for one (deviceId, id) and republishes the stored reply', async () => {
        h.upstream.script({ delayMs: 300 });
        const device = await h.device('cam-3');
        await device.publish('normal', ask('dup', 'first'));
        // In flight before the duplicate is sent: the plant's broker may hand two publishes in a
        // row to different bridge connections, and the second could be admitted first.
        await h.upstream.requested(1);
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

    // Every rejection is a reply with a contract code, never silence, and never touches another device.
    describe('errors', () => {
      describe('bad input', () => {
        let h: Harness;
        let bad: Device;
        let good: Device;
        let n = 0;
        beforeAll(async () => {
          h = await start({ MAX_PAYLOAD_BYTES: '2048', DEVICE_RATE_LIMIT_RPM: '1000' });
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
          {
            name: 'oversized payload',
            priority: 'low',
            payload: ask('x7', 'y'.repeat(4096)),
            id: 'x7',
            code: 'payload_too_large',
            message: /MAX_PAYLOAD_BYTES/,
          },
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
            await h.upstream.requested(before + blockers.length);
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

      describe('device quota and queue limit', () => {
        let h: Harness;
        afterEach(async () => {
          await h.close();
        });

        it('answers rate_limited with retry_after_ms once a device is over DEVICE_RATE_LIMIT_RPM', async () => {
          h = await start({ DEVICE_RATE_LIMIT_RPM: '3' });
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
        });

        it('answers queue_full once QUEUE_MAX requests wait', async () => {
          h = await start({ QUEUE_MAX: '2', MAX_CONCURRENCY: '1' }, { latencyMs: 300 });
          const d = await h.device('filler');
          await d.publish('normal', ask('running'));
          // It has left the queue for the upstream once the upstream has it.
          await h.upstream.requested(1, 3000);
          for (const id of ['q1', 'q2', 'q3']) await d.publish('normal', ask(id));
          // Which of the three the bridge sees last is the plant broker's choice: that one is refused.
          const replies = await Promise.all(['q1', 'q2', 'q3'].map(async (id) => (await d.reply(id, { timeoutMs: 3000 }))[0]));
          expect(replies.map((r) => (r?.ok ? 'ok' : r?.error.code)).sort()).toEqual(['ok', 'ok', 'queue_full']);
          // When to try again, as the README says every queue_full does.
          expect(replies.find((r) => r?.ok === false)).toMatchObject({ error: { code: 'queue_full', retry_after_ms: 1000 } });
        });
      });
    });

    describe('priorities', () => {
      let h: Harness;
      afterEach(async () => {
        await h.close();
      });

      it('runs queued critical requests before earlier-queued low ones', async () => {
        h = await start({ MAX_CONCURRENCY: '1' });
        const d = await h.device('line-1');
        // `first` holds the only slot until everything below has queued behind it.
        h.upstream.script({ delayMs: 1500 });
        await d.publish('normal', ask('first'));
        await h.upstream.requested(1);
        // Each one queued before the next is sent: the plant's broker may hand two publishes in a
        // row to different bridge connections, and the bridge would queue them in either order.
        const queued = { low: 0, critical: 0 };
        for (const [priority, id] of [
          ['low', 'low-1'],
          ['low', 'low-2'],
          ['low', 'low-3'],
          ['critical', 'crit-1'],
          ['critical', 'crit-2'],
        ] as const) {
          await d.publish(priority, ask(id));
          queued[priority] += 1;
          const depth = await readUntil(
            () => h.bridge.store.operations.queueDepth(),
            (q) => q[priority] === queued[priority],
          );
          expect(depth[priority]).toBe(queued[priority]);
        }
        expect(h.upstream.requests[0]?.answeredAt).toBeUndefined(); // `first` still runs: all five waited
        await d.reply('low-3', { timeoutMs: 5000 });

        expect(upstreamOrder(h)).toEqual(['first', 'crit-1', 'crit-2', 'low-1', 'low-2', 'low-3']);
      });

      it('still completes a low request while critical load saturates the bridge (aging)', async () => {
        h = await start(AGING_ENV, { latencyMs: 20 });
        await expectLowRunsUnderCriticalFlood(h, 50);
      });
    });

    mqtt5Suite(mode);
  });
}
