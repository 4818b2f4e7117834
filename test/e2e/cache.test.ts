// The response cache, coalescing of identical requests in flight, and usage accounting,
// through the whole bridge: asserted on what devices got and what the upstream saw.
import { afterEach, describe, expect, it } from 'vitest';
import type { OkReply } from '../../contract/index.js';
import { startFleet, type Fleet } from '../helpers/fleet.js';
import { ask, okOf, sleep, startHarness, type Device, type Harness } from '../helpers/harness.js';
import { readUntil } from '../helpers/wait.js';

describe('response cache', () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it('answers a repeated identical request from the cache, with its own id, without an upstream call', async () => {
    h = await startHarness();
    const a = await h.device('cam-1');
    const b = await h.device('cam-2');
    await a.publish('normal', ask('first', 'Is the weld complete?', { max_tokens: 32 }));
    const first = okOf((await a.reply('first'))[0]);
    await b.publish('high', ask('second', 'Is the weld complete?', { max_tokens: 32 }));
    const second = okOf((await b.reply('second'))[0]);

    expect(h.upstream.requests).toHaveLength(1);
    expect(first.cached).toBe(false);
    expect(second).toMatchObject({ id: 'second', cached: true, priority: 'high', content: first.content, model: first.model, attempts: 0 });
  });

  it('bypasses the cache for "cache": false, for sampled answers, and for different parameters', async () => {
    h = await startHarness();
    const d = await h.device('cam-3');
    const q = 'Count the bolts.';
    await d.publish('normal', ask('a', q));
    await d.reply('a');
    await d.publish('normal', ask('b', q, { cache: false }));
    await d.publish('normal', ask('c', q, { temperature: 0.7 }));
    await d.publish('normal', ask('d', q, { max_tokens: 7 }));
    const replies = await Promise.all(['b', 'c', 'd'].map(async (id) => okOf((await d.reply(id))[0])));
    expect(replies.map((r) => r.cached)).toEqual([false, false, false]);
    expect(h.upstream.requests).toHaveLength(4);
  });

  it('forgets an answer after CACHE_TTL_S, and CACHE_TTL_S=0 turns it off', async () => {
    const ttlS = 1;
    h = await startHarness({ CACHE_TTL_S: String(ttlS) });
    const d = await h.device('cam-4');
    await d.publish('normal', ask('t1', 'Status?'));
    await d.reply('t1');
    await d.publish('normal', ask('t2', 'Status?'));
    expect(okOf((await d.reply('t2'))[0]).cached).toBe(true);
    await sleep(ttlS * 1000 + 100); // past CACHE_TTL_S
    await d.publish('normal', ask('t3', 'Status?'));
    expect(okOf((await d.reply('t3'))[0]).cached).toBe(false);
    expect(h.upstream.requests).toHaveLength(2);
    await h.close();

    h = await startHarness({ CACHE_TTL_S: '0' });
    const e = await h.device('cam-5');
    for (const id of ['u1', 'u2']) {
      await e.publish('normal', ask(id, 'Status?'));
      await e.reply(id);
    }
    expect(h.upstream.requests).toHaveLength(2);
  });
});

describe('coalescing', () => {
  let h: Harness | undefined;
  let fleet: Fleet | undefined;
  afterEach(async () => {
    await h?.close();
    await fleet?.close();
    h = undefined;
    fleet = undefined;
  });

  const sameQuestionFrom = async (devices: Device[]): Promise<OkReply[]> => {
    await Promise.all(devices.map((d, i) => d.publish('normal', ask(`same-${i}`, 'Which part is defective?'))));
    return Promise.all(devices.map(async (d, i) => okOf((await d.reply(`same-${i}`, { timeoutMs: 10_000 }))[0])));
  };

  it('gives 50 devices asking the same at once one upstream call and 50 replies with their own ids', async () => {
    h = await startHarness({ DEVICE_RATE_LIMIT_RPM: '1000' }, { latencyMs: 400 });
    const harness = h;
    const devices = await Promise.all(Array.from({ length: 50 }, (_, i) => harness.device(`line-${i}`)));
    const replies = await sameQuestionFrom(devices);
    expect(h.upstream.requests).toHaveLength(1);
    expect(replies.map((r) => r.id)).toEqual(devices.map((_, i) => `same-${i}`));
    expect(new Set(replies.map((r) => r.content)).size).toBe(1);
    expect(replies.filter((r) => !r.cached)).toHaveLength(1); // the one that called the upstream
  });

  it('coalesces across two instances on Redis', async () => {
    fleet = await startFleet(2, {}, { latencyMs: 400 });
    const [one, two] = fleet.instances as [Harness, Harness];
    const devices = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? one : two).device(`line-${i}`)));
    const replies = await sameQuestionFrom(devices);
    expect(fleet.upstream.requests).toHaveLength(1);
    expect(replies.map((r) => r.id)).toEqual(devices.map((_, i) => `same-${i}`));
  });
});

describe('usage and cost', () => {
  it('adds up tokens by device and model to exactly what the upstream reported, priced from CONFIG_FILE', async () => {
    const { writeFileSync, mkdtempSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const file = join(mkdtempSync(join(tmpdir(), 'eab-')), 'config.json');
    writeFileSync(file, JSON.stringify({ prices: { 'model-a': { inputPerMillion: 1, outputPerMillion: 2 } } }));
    const h = await startHarness({ CONFIG_FILE: file, CACHE_TTL_S: '0' });
    try {
      const a = await h.device('cam-a');
      const b = await h.device('cam-b');
      const work: Array<[Device, string, string]> = [
        [a, 'a1', 'model-a'],
        [a, 'a2', 'model-b'],
        [b, 'b1', 'model-a'],
        [b, 'b2', 'model-a'],
        [b, 'b3', 'model-b'],
      ];
      for (const [device, id, model] of work) await device.publish('normal', ask(id, `question ${id} with some words`, { model }));
      for (const [device, id] of work) await device.reply(id);
      // Usage is recorded right after the reply.
      const report = await readUntil(
        () => h.bridge.store.operations.usage(Date.now() - 60_000, Date.now()),
        (r) => r.byPriority.normal?.requests === 5,
      );
      const seen = h.upstream.requests.map((r) => ({ body: r.body as { model: string; messages: Array<{ content: string }> } }));
      expect(seen).toHaveLength(5);
      // What the devices were told the upstream used is what the simulator reported.
      const replies = work.map(([device, id]) => okOf(device.replies.find((r) => r.id === id)));
      const sum = (rs: OkReply[]) => ({
        promptTokens: rs.reduce((n, r) => n + (r.usage?.prompt_tokens ?? 0), 0),
        completionTokens: rs.reduce((n, r) => n + (r.usage?.completion_tokens ?? 0), 0),
      });
      const ofDevice = (p: string) => replies.filter((r) => r.id.startsWith(p));
      expect(report.byDevice['cam-a']).toMatchObject({ requests: 2, ...sum(ofDevice('a')) });
      expect(report.byDevice['cam-b']).toMatchObject({ requests: 3, ...sum(ofDevice('b')) });
      const modelA = sum(replies.filter((r) => r.model === 'model-a'));
      expect(report.byModel['model-a']).toMatchObject({ requests: 3, ...modelA });
      expect(report.byModel['model-a']?.costUsd).toBeCloseTo((modelA.promptTokens * 1 + modelA.completionTokens * 2) / 1e6, 12);
      expect(report.byModel['model-b']?.costUsd).toBe(0); // no price: no estimate
      expect(report.byPriority.normal?.requests).toBe(5);
      expect(report.total.promptTokens).toBe(sum(replies).promptTokens);
    } finally {
      await h.close();
    }
  });
});
