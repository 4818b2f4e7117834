// The LoadShedder's queue-wait guard, from the waits of claimed jobs and from an estimate of
// the queue ahead, with injected event-loop windows: no real timers.
import { describe, expect, it } from 'vitest';
import type { Priority } from '../../contract/index.js';
import type { QueueEstimate } from '../../bridge/intake/queue-wait.js';
import type { QueueDepth } from '../../bridge/store/port.js';
import { setup, shedPriorities, type Setup } from '../helpers/load-shedder.js';

describe('LoadShedder: queue-wait guard', () => {
  /** A window (event loop quiet) in which jobs of these priorities were claimed after these waits. */
  const waitWindow = (s: Setup, claims: Array<[Priority, number, boolean?]>, held = false): void => {
    for (const [priority, waitMs, locked] of claims) s.shedder.claimed(priority, waitMs, locked ?? false);
    if (held) s.shedder.claimHeld();
    s.window(0);
  };

  it('sheds normal and low from the first window in which every normal job claimed waited over OVERLOAD_QUEUE_WAIT_MS', () => {
    const s = setup(100, 1000, 1000);
    waitWindow(s, [['normal', 1000]]); // at the threshold is not over it
    expect(shedPriorities(s)).toEqual([]);
    waitWindow(s, [
      ['normal', 1200],
      ['normal', 1300],
    ]);
    expect(shedPriorities(s)).toEqual(['normal', 'low']);
    expect(shedPriorities(s).map((p) => s.shedBy(p))).toEqual(['queue_wait', 'queue_wait']);
  });

  it('reads the shortest wait of a window: one job put back after a crash does not trip it', () => {
    const s = setup(100, 1000, 1000);
    waitWindow(s, [
      ['normal', 60_000],
      ['normal', 20],
    ]);
    expect(shedPriorities(s)).toEqual([]);
  });

  it('sheds a priority for its own wait and for the wait of those above it, high only over twice, never critical', () => {
    const low = setup(100, 1000, 1000);
    waitWindow(low, [
      ['low', 5000],
      ['normal', 10],
    ]);
    expect(shedPriorities(low)).toEqual(['low']);

    const high = setup(100, 1000, 1000);
    waitWindow(high, [['high', 1500]]);
    expect(shedPriorities(high)).toEqual(['normal', 'low']);
    waitWindow(high, [['high', 2001]]);
    expect(shedPriorities(high)).toEqual(['high', 'normal', 'low']);

    const critical = setup(100, 1000, 1000);
    waitWindow(critical, [['critical', 60_000]]);
    expect(shedPriorities(critical)).toEqual([]);
  });

  it('does not count jobs that waited for their lock', () => {
    const s = setup(100, 1000, 1000);
    waitWindow(s, [['normal', 5000, true]]);
    expect(shedPriorities(s)).toEqual([]);
  });

  it('stops under half the threshold, or on a window without a claim, so a queue that ran dry is admitted again', () => {
    const s = setup(100, 1000, 1000);
    const enter = (): void => {
      waitWindow(s, [['normal', 1500]]);
      expect(shedPriorities(s)).toEqual(['normal', 'low']);
    };
    enter();
    waitWindow(s, [['normal', 800]]); // between half and the threshold: stays
    expect(shedPriorities(s)).toEqual(['normal', 'low']);
    waitWindow(s, [['normal', 499]]);
    expect(shedPriorities(s)).toEqual([]);
    enter();
    waitWindow(s, []);
    expect(shedPriorities(s)).toEqual([]);
  });

  it('admits again at once when a claim finds the queue empty, without waiting for the window', () => {
    const s = setup(100, 1000, 1000);
    waitWindow(s, [['normal', 1500]]);
    expect(shedPriorities(s)).toEqual(['normal', 'low']);
    s.shedder.claimed('normal', 1400, false); // the backlog's tail, in the window now running
    s.shedder.queueDrained();
    expect(shedPriorities(s)).toEqual([]);
    s.window(0); // and the tail does not count at the window's end
    expect(shedPriorities(s)).toEqual([]);

    // Nor does a backlog's tail that was claimed before the queue ran dry, when not shedding yet.
    s.shedder.claimed('normal', 5000, false);
    s.shedder.queueDrained();
    s.window(0);
    expect(shedPriorities(s)).toEqual([]);
  });

  it('ignores a window in which claims were held back by the rate budget or a 429 pause', () => {
    const s = setup(100, 1000, 1000);
    waitWindow(s, [['normal', 5000]], true);
    expect(shedPriorities(s)).toEqual([]);
    waitWindow(s, [['normal', 5000]]);
    expect(shedPriorities(s)).toEqual(['normal', 'low']);
    waitWindow(s, [['normal', 5000]], true); // and a held window ends it
    expect(shedPriorities(s)).toEqual([]);
  });

  it('answers with the wait, the threshold and a retry_after_ms of the wait (1 to 10 s), and counts the reason', () => {
    const s = setup(100, 1000, 1000);
    waitWindow(s, [
      ['normal', 1800.4],
      ['low', 700],
    ]);
    expect(s.shedder.check('normal')?.message).toBe('bridge overloaded (queue wait 1800 ms, OVERLOAD_QUEUE_WAIT_MS 1000): retry later');
    expect(s.shedder.check('normal')?.retryAfterMs).toBe(1800);
    // low is shed for normal's wait (its own is under the threshold).
    expect(s.shedder.check('low')?.message).toContain('queue wait 1800 ms');
    waitWindow(s, [
      ['normal', 60_000],
      ['low', 60_000],
    ]);
    expect(s.shedder.check('low')?.retryAfterMs).toBe(10_000);
    expect(s.observed.shed.filter(([, reason]) => reason === 'queue_wait').length).toBe(4);
    const short = setup(100, 1000, 300);
    waitWindow(short, [['normal', 400]]);
    expect(short.shedder.check('normal')?.retryAfterMs).toBe(1000);
  });

  it('is off by default and with OVERLOAD_QUEUE_WAIT_MS 0', () => {
    const s = setup(100, 1000, 0);
    for (let i = 0; i < 5; i += 1)
      waitWindow(s, [
        ['normal', 60_000],
        ['low', 60_000],
      ]);
    expect(shedPriorities(s)).toEqual([]);
  });
});

describe('LoadShedder: queue-wait guard, estimated', () => {
  /** A queue and a capacity the test sets; reads counted. */
  function estimate(): QueueEstimate & { queue: QueueDepth; capacity: number | undefined; reads: number; fail: boolean } {
    const e = {
      queue: { critical: 0, high: 0, normal: 0, low: 0 } as QueueDepth,
      capacity: 20 as number | undefined,
      reads: 0,
      fail: false,
      depth: async () => {
        e.reads += 1;
        if (e.fail) throw new Error('store away');
        return { ...e.queue };
      },
      capacityPerS: () => e.capacity,
    };
    return e;
  }
  /** Two windows: the first reads the queue, the second acts on what it read. */
  const read = async (s: Setup): Promise<void> => {
    s.window(0);
    await new Promise((resolve) => setImmediate(resolve));
    s.window(0);
  };

  it('refuses before anything has waited when the queue ahead over the capacity is over the threshold', async () => {
    const e = estimate();
    const s = setup(100, 1000, 300, e);
    e.queue = { critical: 0, high: 0, normal: 10, low: 0 }; // 10 ahead at 20/s: 500 ms
    await read(s);
    expect(shedPriorities(s)).toEqual(['normal', 'low']);
    expect(s.shedder.check('normal')?.message).toBe('bridge overloaded (queue wait 500 ms, OVERLOAD_QUEUE_WAIT_MS 300): retry later');

    // A request counts what is ahead of it: its own priority and the higher ones.
    e.queue = { critical: 1, high: 1, normal: 0, low: 8 }; // high 100 ms, normal 100, low 500
    await read(s);
    expect(shedPriorities(s)).toEqual(['low']);
    e.queue = { critical: 0, high: 13, normal: 0, low: 0 }; // 650 ms for all three: high needs twice 300
    await read(s);
    expect(shedPriorities(s)).toEqual(['high', 'normal', 'low']);
  });

  it('leaves under half the threshold, and estimates nothing without a capacity or a queue', async () => {
    const e = estimate();
    const s = setup(100, 1000, 300, e);
    e.queue = { critical: 0, high: 0, normal: 10, low: 0 };
    await read(s);
    expect(shedPriorities(s)).toEqual(['normal', 'low']);
    e.queue = { critical: 0, high: 0, normal: 4, low: 0 }; // 200 ms: between half and the threshold, stays
    await read(s);
    expect(shedPriorities(s)).toEqual(['normal', 'low']);
    e.queue = { critical: 0, high: 0, normal: 2, low: 0 }; // 100 ms
    await read(s);
    expect(shedPriorities(s)).toEqual([]);

    e.queue = { critical: 0, high: 0, normal: 100, low: 0 };
    e.capacity = undefined; // no job has finished yet
    await read(s);
    expect(shedPriorities(s)).toEqual([]);
    e.capacity = 20;
    e.fail = true;
    await read(s);
    expect(shedPriorities(s)).toEqual([]);
  });

  it('counts what this instance admits and claims between two reads of the queue, so a burst is refused as it arrives', async () => {
    const e = estimate();
    const s = setup(100, 1000, 300, e);
    await read(s); // an empty queue
    const admittedUntilRefused = (): number => {
      let n = 0;
      while (s.shedBy('normal') === undefined && n < 100) {
        s.shedder.admitted('normal');
        n += 1;
      }
      return n;
    };
    // 20 jobs/s: the 7th queued request would wait 350 ms.
    expect(admittedUntilRefused()).toBe(7);
    for (let i = 0; i < 4; i += 1) s.shedder.claimed('normal', 10, false); // started: 3 left, 150 ms
    expect(s.shedBy('normal')).toBe('queue_wait'); // not under half yet
    s.shedder.claimed('normal', 10, false); // 2 left, 100 ms
    expect(s.shedBy('normal')).toBeUndefined();
    s.shedder.queueDrained();
    expect(admittedUntilRefused()).toBe(7);
  });

  it('reads the queue once per window, never twice at once', async () => {
    const e = estimate();
    const s = setup(100, 1000, 300, e);
    s.window(0);
    s.window(0); // the first read has not answered yet
    expect(e.reads).toBe(1);
    await new Promise((resolve) => setImmediate(resolve));
    s.window(0);
    expect(e.reads).toBe(2);
    const off = estimate();
    const s0 = setup(100, 1000, 0, off);
    s0.window(0);
    expect(off.reads).toBe(0); // the guard off reads nothing
  });
});
