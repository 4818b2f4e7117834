// The SCADA outputs' shared state, over every implementation: last good answers bounded in
// entries, bytes and age; bdSeq wrapping and kept; one lease holder per Edge Node; events
// reaching every instance's listeners. On Redis, "another instance" is a second object on the
// same prefix, as a second bridge would be.
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import type { ScadaAnswer } from '../../contract/index.js';
import { MemoryScadaState } from '../../bridge/store/memory-scada-state.js';
import { RedisScadaState } from '../../bridge/store/redis-scada-state.js';
import { redisKeys } from '../../bridge/store/redis-keys.js';
import { SCADA_RECORD_MAX_BYTES, type ScadaEvent, type ScadaState, type ScadaStateBounds } from '../../bridge/store/scada-state.js';
import { eventually } from '../helpers/wait.js';
import { connectRedis, deletePrefix, uniquePrefix } from '../helpers/redis.js';

const redis = connectRedis();
const prefixes: string[] = [];
const opened: ScadaState[] = [];
afterAll(async () => {
  for (const state of opened) await state.close();
  for (const prefix of prefixes) await deletePrefix(redis, prefix);
  redis.disconnect();
});

const BOUNDS: ScadaStateBounds = { maxEntries: 3, maxRecordBytes: 2048, ttlS: 60 };

/** Opens a state; `another()` opens a second instance sharing it where the implementation can. */
interface Fixture {
  state: ScadaState;
  another(): ScadaState;
}

type Open = (bounds: ScadaStateBounds, clock: () => number) => Fixture;

const IMPLEMENTATIONS: Array<[string, Open]> = [
  [
    'memory',
    (bounds, clock) => {
      const state = track(new MemoryScadaState(bounds, clock));
      // One process: the same object is every "instance".
      return { state, another: () => state };
    },
  ],
  [
    'redis',
    (bounds, clock) => {
      const prefix = uniquePrefix('scada');
      prefixes.push(prefix);
      const open = (): ScadaState => track(new RedisScadaState(redis, { prefix, bounds, clock }));
      return { state: open(), another: open };
    },
  ],
];

function track(state: ScadaState): ScadaState {
  opened.push(state);
  return state;
}

function answer(deviceId: string, template: string, data: ScadaAnswer['data'], timestamp = 1): ScadaAnswer {
  return { deviceId, template, data, quality: 'good', timestamp, requestId: `r-${timestamp}`, model: 'm', latencyMs: 12 };
}

describe.each(IMPLEMENTATIONS)('SCADA state (%s)', (_name, open) => {
  let now = 1_700_000_000_000;
  const clock = (): number => now;

  it("keeps each device-template's last good answer, replacing the previous one", async () => {
    const { state, another } = open(BOUNDS, clock);
    await state.keepGood(answer('press-1', 'inspect', { reject: true, burr_mm: 0.31 }, 1));
    await state.keepGood(answer('press-1', 'inspect', { reject: false, burr_mm: 0.02 }, 2));
    await state.keepGood(answer('press-1', 'count', { parts: 7 }, 3));
    expect(await another().lastGood('press-1', 'inspect')).toEqual(answer('press-1', 'inspect', { reject: false, burr_mm: 0.02 }, 2));
    expect((await state.lastGood('press-1', 'count'))?.data).toEqual({ parts: 7 });
    expect(await state.lastGood('press-2', 'inspect')).toBeUndefined();
    expect(await state.lastGood('press-1', 'other')).toBeUndefined();
  });

  it('keeps at most maxEntries, dropping the least recently answered, and lists the most recent first', async () => {
    const { state, another } = open(BOUNDS, clock);
    for (const id of ['a', 'b', 'c']) {
      now += 1000;
      await state.keepGood(answer(id, 't', { n: 1 }));
    }
    now += 1000;
    await state.keepGood(answer('a', 't', { n: 2 })); // renewed: b is now the least recent
    now += 1000;
    await another().keepGood(answer('d', 't', { n: 1 }));
    expect(await state.lastGood('b', 't')).toBeUndefined();
    expect((await state.allGood(10)).map((a) => a.deviceId)).toEqual(['d', 'a', 'c']);
    expect((await state.allGood(2)).map((a) => a.deviceId)).toEqual(['d', 'a']);
    expect(await state.allGood(0)).toEqual([]);
  });

  it('does not keep a record over maxRecordBytes (the one kept before stays)', async () => {
    const { state } = open(BOUNDS, clock);
    await state.keepGood(answer('cam-1', 't', { label: 'ok' }, 1));
    await state.keepGood(answer('cam-1', 't', { label: 'x'.repeat(BOUNDS.maxRecordBytes) }, 2));
    expect((await state.lastGood('cam-1', 't'))?.data).toEqual({ label: 'ok' });
    expect((await state.allGood(10)).map((a) => a.timestamp)).toEqual([1]);
  });

  it('forgets a record not renewed for ttlS', async () => {
    const { state } = open(BOUNDS, clock);
    await state.keepGood(answer('old', 't', { n: 1 }));
    now += 30_000;
    await state.keepGood(answer('young', 't', { n: 1 }));
    now += 29_999;
    expect((await state.allGood(10)).map((a) => a.deviceId)).toEqual(['young', 'old']);
    now += 1;
    expect(await state.lastGood('old', 't')).toBeUndefined();
    expect((await state.allGood(10)).map((a) => a.deviceId)).toEqual(['young']);
    expect((await state.lastGood('young', 't'))?.deviceId).toBe('young');
  });

  it('counts bdSeq from 0 to 255 and around again, per node, across instances', async () => {
    const { state, another } = open(BOUNDS, clock);
    const seen: number[] = [];
    for (let i = 0; i < 256; i++) seen.push(await state.nextBdSeq('node-a'));
    expect(seen).toEqual([...Array(256).keys()]);
    expect(await another().nextBdSeq('node-a')).toBe(0);
    expect(await another().nextBdSeq('node-a')).toBe(1);
    expect(await state.nextBdSeq('node-b')).toBe(0);
  });

  it('lets one owner hold a lease, renew it and give it up; no one else can release it', async () => {
    const { state, another } = open(BOUNDS, Date.now);
    const other = another();
    expect(await state.holdLease('node', 'a', 60_000)).toBe(true);
    expect(await other.holdLease('node', 'b', 60_000)).toBe(false);
    expect(await state.holdLease('node', 'a', 60_000)).toBe(true);
    await other.releaseLease('node', 'b');
    expect(await other.holdLease('node', 'b', 60_000)).toBe(false);
    expect(await other.holdLease('other-node', 'b', 60_000)).toBe(true);
    await state.releaseLease('node', 'a');
    expect(await other.holdLease('node', 'b', 60_000)).toBe(true);
    expect(await state.holdLease('node', 'a', 60_000)).toBe(false);
  });

  it('lets another owner take a lease that was not renewed in time', async () => {
    const { state, another } = open(BOUNDS, Date.now);
    const leaseMs = 100;
    expect(await state.holdLease('node', 'a', leaseMs)).toBe(true);
    expect(await another().holdLease('node', 'b', leaseMs)).toBe(false);
    await sleep(leaseMs + 150); // past the lease, not renewed
    expect(await another().holdLease('node', 'b', 60_000)).toBe(true);
    expect(await state.holdLease('node', 'a', leaseMs)).toBe(false);
  });

  it("hands every instance's events to the listeners, in order, until they unsubscribe", async () => {
    const { state, another } = open(BOUNDS, clock);
    const publisher = another();
    const got: ScadaEvent[] = [];
    const unsubscribe = await state.onAnnounce((event) => got.push(event));
    const events: ScadaEvent[] = [
      { kind: 'answer', answer: answer('press-1', 'inspect', { reject: true }, 1) },
      { kind: 'gone', deviceId: 'press-1', atMs: 5 },
      { kind: 'answer', answer: { ...answer('press-1', 'inspect', undefined, 2), quality: 'bad', error: 'upstream_error' } },
    ];
    for (const event of events) await publisher.announce(event);
    await eventually('the events', () => got.length === events.length);
    expect(got).toEqual(events);
    // A barrier: a listener that stays is handed the next event with the same delivery.
    const stays: ScadaEvent[] = [];
    await state.onAnnounce((event) => stays.push(event));
    await unsubscribe();
    await publisher.announce(events[1] as ScadaEvent);
    await eventually('the event at the listener that stays', () => stays.length === 1);
    expect(got).toHaveLength(events.length);
  });
});

describe('SCADA state on Redis', () => {
  it('keeps every key under the prefix, bounded in age; bdSeq without expiry', async () => {
    const prefix = uniquePrefix('scada-keys');
    prefixes.push(prefix);
    const state = track(new RedisScadaState(redis, { prefix, bounds: { ...BOUNDS, ttlS: 600 } }));
    await state.keepGood(answer('press-1', 'inspect', { reject: true }));
    await state.nextBdSeq('node');
    await state.holdLease('node', 'a', 5000);
    const keys = redisKeys(prefix);
    for (const key of [keys.scadaGood, keys.scadaRecords]) {
      const ttl = await redis.pttl(key);
      expect(ttl).toBeGreaterThan(590_000);
      expect(ttl).toBeLessThanOrEqual(600_000);
    }
    expect(await redis.pttl(keys.scadaLease('node'))).toBeGreaterThan(0);
    expect(await redis.pttl(keys.scadaBdSeq('node'))).toBe(-1);
  });
});

describe('SCADA record bound', () => {
  it('bounds a default record so the largest default output still fits', () => {
    const data = Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`f${String(i).padStart(62, '0')}`, 'x'.repeat(1024)]));
    const record = JSON.stringify({ ...answer('d'.repeat(64), 't'.repeat(64), data), requestId: 'r'.repeat(64), model: 'm'.repeat(256) });
    expect(Buffer.byteLength(record)).toBeLessThanOrEqual(SCADA_RECORD_MAX_BYTES);
  });
});
