// The client's retries keep the bridge's guarantees: a retry reuses the call's id (so the
// upstream is paid once), waits what the bridge asked, and never repeats a refusal the request
// caused. Asserted on what the broker carried (a spy connection of the device) and what the
// upstream received.
import { afterEach, describe, expect, it } from 'vitest';
import { BridgeClient, BridgeRequestError } from '../../client/index.js';
import { BROKER_MODES, sleep, startHarness, type Harness } from '../helpers/harness.js';
import { waitUntil } from '../helpers/wait.js';
import { spyOn, type Spy } from './spy.js';

let h: Harness | undefined;
let client: BridgeClient | undefined;
let spy: Spy | undefined;
afterEach(async () => {
  await client?.close();
  await spy?.close();
  await h?.close();
  client = spy = h = undefined;
});

const OPEN_LIMITS = { DEVICE_RATE_LIMIT_RPM: '100000', RATE_LIMIT_RPM: '100000' };
const ask = (content: string) => ({ messages: [{ role: 'user' as const, content }] });

async function rejection(p: Promise<unknown>): Promise<BridgeRequestError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof BridgeRequestError)) throw new Error(`expected a BridgeRequestError, got ${String(err)}`);
  return err;
}

describe.each(BROKER_MODES)('client retries on the %s broker', (mode) => {
  it.each([5, 4] as const)('MQTT %i: an attempt that times out is sent again with the same id, and the upstream is called once', async (protocolVersion) => {
    h = await startHarness(OPEN_LIMITS, { latencyMs: 1500 }, undefined, { mode });
    spy = await spyOn(h.url, 'cam-1');
    client = await BridgeClient.connect({ url: h.url, deviceId: 'cam-1', protocolVersion, attemptTimeoutMs: 400 });
    const reply = await client.chat(ask('slow part'));
    expect(reply.content).toBe('sim answer to: slow part');
    const sent = spy.requests();
    expect(sent.length).toBeGreaterThanOrEqual(3);
    expect(new Set(sent.map((s) => s.id))).toEqual(new Set([reply.id]));
    expect(h.upstream.requests).toHaveLength(1);
  });

  it('waits the retry_after_ms of a queue_full before it sends the request again, then gets its answer', async () => {
    h = await startHarness({ ...OPEN_LIMITS, QUEUE_MAX: '1', MAX_CONCURRENCY: '1' }, { latencyMs: 1200 }, undefined, { mode });
    spy = await spyOn(h.url, 'cam-2');
    client = await BridgeClient.connect({ url: h.url, deviceId: 'cam-2' });
    const calls = [client.chat(ask('first')), client.chat(ask('second')), client.chat(ask('third'))];
    const replies = await Promise.all(calls);
    expect(replies.map((r) => r.content)).toEqual(['sim answer to: first', 'sim answer to: second', 'sim answer to: third']);
    const refusals = spy.replies().filter((r) => (r.body.error as { code?: string } | undefined)?.code === 'queue_full');
    expect(refusals.length).toBeGreaterThan(0);
    for (const refusal of refusals) {
      const wait = (refusal.body.error as { retry_after_ms: number }).retry_after_ms;
      expect(wait).toBeGreaterThanOrEqual(1000);
      // What the broker carried next for that id: the retry, or (the embedded broker forwards no
      // refused request) the refusal of the retry. Not before the bridge's wait (a few ms of clock
      // between the spy's two receipts), nor much after it.
      const next = spy.seen.find((s) => s.id === refusal.id && s.at > refusal.at);
      expect(next).toBeDefined();
      expect(next!.at - refusal.at).toBeGreaterThanOrEqual(wait - 50);
      if (next!.kind === 'request' || next!.body.ok === false) expect(next!.at - refusal.at).toBeLessThan(wait * 1.2 + 500);
    }
    expect(h.upstream.requests).toHaveLength(3);
  });

  it('rejects what the request caused with its contract code, once, without a retry', async () => {
    h = await startHarness({ ...OPEN_LIMITS, MAX_PAYLOAD_BYTES: '2048' }, { latencyMs: 5 }, undefined, { mode });
    spy = await spyOn(h.url, 'cam-3');
    const attemptTimeoutMs = 300;
    client = await BridgeClient.connect({ url: h.url, deviceId: 'cam-3', attemptTimeoutMs });
    const invalid = await rejection(client.chat({ messages: [{ role: 'robot' as 'user', content: 'x' }] }));
    expect(invalid).toMatchObject({ code: 'invalid_request', attempts: 1 });
    expect(invalid.message).toContain('role');
    expect(invalid.reply?.error.code).toBe('invalid_request');
    const large = await rejection(client.chat(ask('x'.repeat(4000))));
    expect(large).toMatchObject({ code: 'payload_too_large', attempts: 1 });
    // A retry would have come after attemptTimeoutMs and been refused again: one reply each, three of them later.
    await sleep(3 * attemptTimeoutMs + 100);
    expect(spy.replies(invalid.requestId)).toHaveLength(1);
    expect(spy.replies(large.requestId)).toHaveLength(1);
    expect(h.upstream.requests).toHaveLength(0);
  });

  it('ends a call at its deadline with code timeout, having paid the upstream once; a late reply is dropped', async () => {
    h = await startHarness(OPEN_LIMITS, { latencyMs: 2500 }, undefined, { mode });
    spy = await spyOn(h.url, 'cam-4');
    client = await BridgeClient.connect({ url: h.url, deviceId: 'cam-4', attemptTimeoutMs: 400 });
    const err = await rejection(client.chat(ask('too slow'), { timeoutMs: 1000 }));
    expect(err.code).toBe('timeout');
    expect(err.attempts).toBeGreaterThanOrEqual(2);
    expect(spy.requests(err.requestId).length).toBe(err.attempts);
    // Its ttl_ms was the time left: the bridge had started the call, so it still answers, once.
    expect(spy.requests(err.requestId)[0]?.body.ttl_ms).toBeLessThanOrEqual(1000);
    await waitUntil(() => spy!.replies(err.requestId).length === 1, 5000);
    expect(h.upstream.requests).toHaveLength(1);
    // The client carries on: the late reply reached nobody and broke nothing.
    expect((await client.chat(ask('next'), { timeoutMs: 5000 })).content).toBe('sim answer to: next');
  });
});

describe('client calls ended by the caller', () => {
  it('rejects with aborted on a signal, and with closed on close()', async () => {
    h = await startHarness(OPEN_LIMITS, { latencyMs: 1000 });
    client = await BridgeClient.connect({ url: h.url, deviceId: 'cam-5' });
    const controller = new AbortController();
    const aborted = rejection(client.chat(ask('a'), { signal: controller.signal }));
    controller.abort();
    expect((await aborted).code).toBe('aborted');
    const pending = rejection(client.chat(ask('b')));
    await client.close();
    expect((await pending).code).toBe('closed');
    expect((await rejection(client.chat(ask('c')))).code).toBe('closed');
    client = undefined;
  });
});
