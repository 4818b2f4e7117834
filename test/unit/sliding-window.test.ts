import { describe, expect, it } from 'vitest';
import { SlidingWindow } from '../../bridge/store/sliding-window.js';

const W = 60_000;
const T = 1_700_000_000_000;

/**
 * The obvious model, written separately: an event at t is in the window at `now` while
 * t > now - windowMs. (`now` only moves forward here, so dropped events stay dropped.)
 */
class Reference {
  private events: { t: number; w: number }[] = [];
  constructor(private readonly windowMs: number) {}
  add(t: number, w: number): void {
    this.events.push({ t, w });
  }
  private live(now: number): { t: number; w: number }[] {
    this.events = this.events.filter((e) => e.t > now - this.windowMs);
    return this.events;
  }
  count(now: number): number {
    return this.live(now).length;
  }
  weight(now: number): number {
    return this.live(now).reduce((s, e) => s + e.w, 0);
  }
  /** Fewer than `limit` remain once the (count - limit + 1) oldest have left. */
  freeAt(limit: number, now: number): number {
    const live = this.live(now);
    const mustLeave = live.length - limit + 1;
    return mustLeave <= 0 ? now : (live[mustLeave - 1] as { t: number }).t + this.windowMs;
  }
  /** Drop the oldest one by one until the weight is small enough (or nothing is left). */
  weightFreeAt(maxWeight: number, now: number): number {
    const live = this.live(now);
    let weight = live.reduce((s, e) => s + e.w, 0);
    let at = now;
    for (const e of live) {
      if (weight <= maxWeight) return at;
      weight -= e.w;
      at = e.t + this.windowMs;
    }
    return at;
  }
}

describe('SlidingWindow', () => {
  it('counts an event until the end of its bucket plus the window (2 s buckets by default)', () => {
    const w = new SlidingWindow(W);
    w.add(T, 1); // T is a bucket's end: it leaves exactly a window later
    w.add(T + 1, 1); // the next bucket, (T, T + 2000]
    w.add(T + 2000, 1);
    expect(w.count(T + W - 1)).toBe(3);
    expect(w.count(T + W)).toBe(2);
    expect(w.freeAt(2, T + W)).toBe(T + 2000 + W);
    expect(w.count(T + 2000 + W - 1)).toBe(2);
    expect(w.count(T + 2000 + W)).toBe(0);
  });

  it('keeps an event at t in the window until t + windowMs, when it leaves', () => {
    const w = new SlidingWindow(W, 1);
    w.add(T, 5);
    expect(w.count(T)).toBe(1);
    expect(w.count(T + W - 1)).toBe(1);
    expect(w.weight(T + W - 1)).toBe(5);
    expect(w.count(T + W)).toBe(0);
    expect(w.weight(T + W)).toBe(0);
  });

  it('evicts count and weight event by event at each edge', () => {
    const w = new SlidingWindow(W, 1);
    w.add(T, 5);
    w.add(T + 10, 7);
    w.add(T + 10, 1);
    w.add(T + 20, 3);
    expect([w.count(T + 20), w.weight(T + 20)]).toEqual([4, 16]);
    expect([w.count(T + W - 1), w.weight(T + W - 1)]).toEqual([4, 16]);
    expect([w.count(T + W), w.weight(T + W)]).toEqual([3, 11]);
    expect([w.count(T + W + 9), w.weight(T + W + 9)]).toEqual([3, 11]);
    expect([w.count(T + W + 10), w.weight(T + W + 10)]).toEqual([1, 3]);
    expect([w.count(T + W + 20), w.weight(T + W + 20)]).toEqual([0, 0]);
  });

  it('freeAt: now while under the limit, else when enough of the oldest events have left', () => {
    const w = new SlidingWindow(W, 1);
    w.add(T, 1);
    w.add(T + 100, 1);
    w.add(T + 200, 1);
    expect(w.freeAt(4, T + 300)).toBe(T + 300);
    expect(w.freeAt(3, T + 300)).toBe(T + W); // one must leave: the oldest
    expect(w.freeAt(2, T + 300)).toBe(T + 100 + W);
    expect(w.freeAt(1, T + 300)).toBe(T + 200 + W);
    expect(w.freeAt(3, T + W - 1)).toBe(T + W);
    expect(w.freeAt(3, T + W)).toBe(T + W); // the oldest has just left
    expect(w.count(w.freeAt(2, T + 300))).toBeLessThan(2);
  });

  it('weightFreeAt: the earliest time the weight is at most maxWeight', () => {
    const w = new SlidingWindow(W, 1);
    w.add(T, 5);
    w.add(T + 10, 7);
    w.add(T + 20, 3);
    const now = T + 30;
    expect(w.weightFreeAt(15, now)).toBe(now);
    expect(w.weightFreeAt(14, now)).toBe(T + W); // 10 once the 5 leaves
    expect(w.weightFreeAt(10, now)).toBe(T + W);
    expect(w.weightFreeAt(9, now)).toBe(T + 10 + W); // 3 once the 7 leaves
    expect(w.weightFreeAt(3, now)).toBe(T + 10 + W);
    expect(w.weightFreeAt(2, now)).toBe(T + 20 + W); // all must leave
    expect(w.weightFreeAt(0, now)).toBe(T + 20 + W);
    expect(w.weightFreeAt(-100, now)).toBe(T + 20 + W); // never enough: when the window is empty
    expect(new SlidingWindow(W, 1).weightFreeAt(0, now)).toBe(now);
  });

  it('weightFreeAt counts events sharing a timestamp as leaving together', () => {
    const w = new SlidingWindow(W, 1);
    w.add(T, 5);
    w.add(T, 5);
    w.add(T + 1, 5);
    expect(w.weightFreeAt(10, T + 2)).toBe(T + W);
    expect(w.weightFreeAt(5, T + 2)).toBe(T + W);
    expect(w.weight(T + W)).toBe(5);
  });

  it('keeps every answer right across compaction after many events', () => {
    const w = new SlidingWindow(1000, 1);
    const ref = new Reference(1000);
    let now = T;
    let seed = 42;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    // ~3 events per ms for 5000 ms: the head passes 1024 many times over, so the arrays compact.
    for (let step = 0; step < 5000; step += 1) {
      now += 1;
      const n = rand(6);
      for (let i = 0; i < n; i += 1) {
        const weight = 1 + rand(50);
        w.add(now, weight);
        ref.add(now, weight);
      }
      if (step % 7 === 0) {
        expect(w.count(now)).toBe(ref.count(now));
        expect(w.weight(now)).toBe(ref.weight(now));
      }
      if (step % 97 === 0) {
        const count = ref.count(now);
        const weight = ref.weight(now);
        for (const limit of [1, Math.max(1, count >> 1), count, count + 1]) {
          expect(w.freeAt(limit, now)).toBe(ref.freeAt(limit, now));
        }
        for (const max of [0, weight >> 2, weight >> 1, weight - 1, weight]) {
          expect(w.weightFreeAt(max, now)).toBe(ref.weightFreeAt(max, now));
        }
      }
    }
    // And after a long quiet spell.
    expect(w.count(now + 999)).toBe(ref.count(now + 999));
    expect(w.weight(now + 999)).toBe(ref.weight(now + 999));
    expect(w.count(now + 1000)).toBe(0);
    expect(w.weight(now + 1000)).toBe(0);
  });

  it('compacts its storage instead of growing without bound', () => {
    const w = new SlidingWindow(10, 1);
    for (let t = 0; t < 100_000; t += 1) {
      w.add(t, 1);
      expect(w.count(t)).toBe(Math.min(t + 1, 10));
    }
    const internals = w as unknown as { times: number[]; weights: number[] };
    expect(internals.times.length).toBeLessThan(5000);
    expect(internals.weights.length).toBe(internals.times.length);
  });
});
