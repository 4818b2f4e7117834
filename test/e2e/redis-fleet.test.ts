// A fleet of bridge instances on one Redis (fresh prefix per test), each with its own broker
// and ports, all calling ONE upstream simulator: what the contract promises across
// instances (guarantees 2, 3, 4 and 6), asserted on what devices and the upstream saw.
import { afterEach, describe, expect, it } from 'vitest';
import type { Reply } from '../../contract/index.js';
import type { RecordedRequest } from '../../upstream-sim/sim.js';
import { AGING_ENV, expectLowRunsUnderCriticalFlood } from '../helpers/aging.js';
import { startFleet, type Fleet } from '../helpers/fleet.js';
import { barrier, callsBeforeBarrier } from '../helpers/barrier.js';
import { ask, type Device } from '../helpers/harness.js';
import { eventually, quietFor } from '../helpers/wait.js';

/** The prompt of a recorded upstream call: the tag the test put in the message content. */
const tagOf = (r: RecordedRequest): string => {
  const body = r.body as { messages: Array<{ content: string }> };
  return body.messages[0]?.content ?? '';
};

const header = (r: RecordedRequest, name: string): string | undefined => {
  const v = r.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

const until = (what: string, check: () => boolean, timeoutMs = 4000): Promise<void> => eventually(what, check, timeoutMs);

const repliesFor = (d: Device, id: string): Reply[] => d.replies.filter((r) => r.id === id);

describe('a fleet of bridge instances on one Redis', () => {
  let fleet: Fleet | undefined;
  afterEach(async () => {
    await fleet?.close();
    fleet = undefined;
  });

  it('never overlaps requests sharing a lock across instances, fences rise, unlocked work is not held up', async () => {
    const LATENCY = 150;
    fleet = await startFleet(2, {}, { latencyMs: LATENCY });
    const [one, two] = fleet.instances as [NonNullable<Fleet['instances'][0]>, NonNullable<Fleet['instances'][0]>];
    const onOne = await one.device('arm-a');
    const onTwo = await two.device('arm-b');
    const lock = 'line-3/robot-arm';
    const locked = [0, 1, 2, 3, 4, 5].map((i) => ({ device: i % 2 === 0 ? onOne : onTwo, id: `locked-${i}` }));
    const free = [0, 1, 2, 3].map((i) => ({ device: i % 2 === 0 ? onOne : onTwo, id: `free-${i}` }));

    // The locked series is queued first, so unlocked work queued behind it would be held up
    // were the lock blocking the queue rather than only its own key.
    await Promise.all(locked.map(({ device, id }) => device.publish('normal', ask(id, `tag ${id}`, { lock }))));
    const freeSentAt = Date.now();
    await Promise.all(free.map(({ device, id }) => device.publish('normal', ask(id, `tag ${id}`))));
    for (const { device, id } of [...locked, ...free]) {
      const [reply] = await device.reply(id, { timeoutMs: 5000 });
      expect(reply).toMatchObject({ id, ok: true });
    }

    const seen = fleet.upstream.requests;
    expect(seen).toHaveLength(10);
    const lockedCalls = seen.filter((r) => tagOf(r).startsWith('tag locked-')).sort((a, b) => a.at - b.at);
    const freeCalls = seen.filter((r) => tagOf(r).startsWith('tag free-'));
    expect(lockedCalls.map(tagOf).sort()).toEqual(locked.map(({ id }) => `tag ${id}`).sort());
    expect(freeCalls).toHaveLength(4);

    // Exclusivity: each locked call arrives only after the previous one was answered.
    for (const r of lockedCalls) expect(r.answeredAt).toBeDefined();
    for (let i = 1; i < lockedCalls.length; i += 1) {
      const prev = lockedCalls[i - 1] as RecordedRequest;
      const cur = lockedCalls[i] as RecordedRequest;
      expect(cur.at, `${tagOf(cur)} arrived while ${tagOf(prev)} was running`).toBeGreaterThanOrEqual(prev.answeredAt as number);
    }

    // Fencing: the key and a number that rises strictly, in the order the upstream saw the calls.
    expect(lockedCalls.map((r) => header(r, 'x-lock-key'))).toEqual(lockedCalls.map(() => lock));
    const fences = lockedCalls.map((r) => Number(header(r, 'x-lock-fence')));
    for (const f of fences) expect(Number.isInteger(f)).toBe(true);
    for (let i = 1; i < fences.length; i += 1) expect(fences[i]).toBeGreaterThan(fences[i - 1] as number);
    for (const r of freeCalls) {
      expect(header(r, 'x-lock-key')).toBeUndefined();
      expect(header(r, 'x-lock-fence')).toBeUndefined();
    }

    // Unlocked work ran at once, in parallel, long before the serialised locked series ended.
    const lockedEnd = Math.max(...lockedCalls.map((r) => r.answeredAt as number));
    const freeEnd = Math.max(...freeCalls.map((r) => r.answeredAt as number));
    expect(lockedEnd - (lockedCalls[0] as RecordedRequest).at).toBeGreaterThanOrEqual(6 * LATENCY - 10);
    expect(freeEnd - freeSentAt).toBeLessThan(2.5 * LATENCY);
    expect(lockedEnd - freeEnd).toBeGreaterThan(2 * LATENCY);
  });

  it('holds RATE_LIMIT_RPM across instances: the rest stays queued', async () => {
    fleet = await startFleet(2, { RATE_LIMIT_RPM: '10' }, { latencyMs: 20 });
    const [one, two] = fleet.instances as [NonNullable<Fleet['instances'][0]>, NonNullable<Fleet['instances'][0]>];
    const onOne = await one.device('meter-a');
    const onTwo = await two.device('meter-b');
    const sends: Array<Promise<void>> = [];
    for (let i = 0; i < 8; i += 1) {
      sends.push(onOne.publish('normal', ask(`a-${i}`)));
      sends.push(onTwo.publish('normal', ask(`b-${i}`)));
    }
    await Promise.all(sends);

    const { upstream } = fleet;
    await until('10 upstream calls', () => upstream.requests.length >= 10);
    // No barrier: the window holds whatever would follow. Were the budget per instance, more calls would come now.
    await quietFor(1500);
    expect(upstream.requests).toHaveLength(10);
    // Both instances had work of their own: the budget is shared, not per instance.
    const replies = [...onOne.replies, ...onTwo.replies];
    expect(replies).toHaveLength(10);
    for (const r of replies) expect(r).toMatchObject({ ok: true });
    // The other 6 wait in the shared queue (no error reply, no upstream call).
    const depth = await one.bridge.store.operations.queueDepth();
    expect(depth).toEqual({ critical: 0, high: 0, normal: 6, low: 0 });
    expect(await two.bridge.store.operations.queueDepth()).toEqual(depth);
  });

  it('runs one upstream call for the same (deviceId, id) sent to both instances; both connections get the reply', async () => {
    fleet = await startFleet(2, {}, { latencyMs: 300 });
    const [one, two] = fleet.instances as [NonNullable<Fleet['instances'][0]>, NonNullable<Fleet['instances'][0]>];
    const a = await one.device('cam-1.a');
    const b = await two.device('cam-1.b');

    await Promise.all([a.publish('normal', ask('dup-1', 'from a')), b.publish('normal', ask('dup-1', 'from b'))]);
    const [fromA] = await a.reply('dup-1');
    const [fromB] = await b.reply('dup-1');
    await barrier(a, 'normal', [b]); // a second reply (a second run, or a republish) would come before it

    expect(callsBeforeBarrier(fleet.upstream)).toHaveLength(1);
    expect(fromA).toMatchObject({ id: 'dup-1', ok: true });
    expect(fromB).toEqual(fromA);
    // The one reply at the end answers both: one copy on each connection, whichever instance ran it.
    expect(repliesFor(a, 'dup-1')).toHaveLength(1);
    expect(repliesFor(b, 'dup-1')).toHaveLength(1);
  });

  it('delivers replies to a device connected only to another instance than the one it published on', async () => {
    fleet = await startFleet(2, {}, { latencyMs: 20 });
    const [one, two] = fleet.instances as [NonNullable<Fleet['instances'][0]>, NonNullable<Fleet['instances'][0]>];
    const sub = await two.device('cam-9.sub');
    const pub = await one.device('cam-9.pub');
    const ids = ['x-1', 'x-2', 'x-3', 'x-4'];
    for (const id of ids) await pub.publish('high', ask(id));
    for (const id of ids) {
      const [reply] = await sub.reply(id);
      expect(reply).toMatchObject({ id, ok: true, content: `sim answer to: question ${id}` });
      await pub.reply(id);
    }
    await barrier(pub, 'high', [sub]); // a second copy of any reply would come before it
    for (const id of ids) {
      expect(repliesFor(sub, id)).toHaveLength(1);
      expect(repliesFor(pub, id)).toHaveLength(1);
    }
    expect(callsBeforeBarrier(fleet.upstream)).toHaveLength(ids.length);
  });

  it('still completes a low request while critical load saturates the bridge (aging, Redis store)', async () => {
    fleet = await startFleet(1, AGING_ENV, { latencyMs: 20 });
    // A little more slack than the memory store for the trip through Redis.
    await expectLowRunsUnderCriticalFlood(fleet.instances[0] as NonNullable<Fleet['instances'][0]>, 100);
  });

  it('answers a repeat after a restart from the stored reply, without calling the upstream again', async () => {
    fleet = await startFleet(1, {}, { latencyMs: 20 });
    const first = fleet.instances[0] as NonNullable<Fleet['instances'][0]>;
    const before = await first.device('cam-5');
    await before.publish('normal', ask('once-1'));
    const [original] = await before.reply('once-1');
    expect(original).toMatchObject({ id: 'once-1', ok: true, content: 'sim answer to: question once-1' });
    await fleet.stop(first);

    const second = await fleet.add();
    expect(second.bridge.instanceId).not.toBe(first.bridge.instanceId);
    const after = await second.device('cam-5');
    // Whatever its payload: the (deviceId, id) is what counts.
    await after.publish('high', ask('once-1', 'a different question'));
    const [again] = await after.reply('once-1');
    expect(again).toEqual(original);
    await barrier(after, 'high'); // a run of the repeat, and its reply, would come before it
    expect(repliesFor(after, 'once-1')).toHaveLength(1);
    expect(callsBeforeBarrier(fleet.upstream)).toHaveLength(1);
  });
});
