// The LoadShedder's state machine with injected event-loop windows and clock: no real timers.
import { describe, expect, it } from 'vitest';
import type { Priority } from '../../contract/index.js';
import { createLogger } from '../../bridge/logger.js';
import { LoadShedder, type DelaySource, type ShedReason } from '../../bridge/intake/overload.js';
import type { QueueEstimate } from '../../bridge/intake/queue-wait.js';
import type { QueueDepth } from '../../bridge/store/types.js';

interface Setup {
  shedder: LoadShedder;
  /** Ends a window in which the loop was at most this late. */
  window(delayMs: number): void;
  shedBy(priority: Priority): ShedReason | undefined;
  observed: { shed: Array<[Priority, ShedReason]>; delays: number[] };
  logs: Array<{ level: number; msg: string; shed?: unknown; episodeShed?: number }>;
  advance(ms: number): void;
}

function setup(overloadDelayMs = 100, maxPendingAdmissions = 1000, overloadQueueWaitMs = 0, queueEstimate?: QueueEstimate): Setup {
  let next = 0;
  let now = 0;
  const source: DelaySource = { takeWindowMs: () => next, close: () => undefined };
  const observed: Setup['observed'] = { shed: [], delays: [] };
  const logs: Setup['logs'] = [];
  const logger = createLogger('info', {
    write: (line: string) => logs.push(JSON.parse(line) as Setup['logs'][number]),
  } as unknown as NodeJS.WritableStream);
  const shedder = new LoadShedder({
    overloadDelayMs,
    maxPendingAdmissions,
    overloadQueueWaitMs,
    ...(queueEstimate ? { queueEstimate } : {}),
    logger,
    delaySource: source,
    clock: () => now,
    observer: {
      shed: (priority, reason) => observed.shed.push([priority, reason]),
      eventLoopDelay: (ms) => observed.delays.push(ms),
    },
  });
  return {
    shedder,
    window(delayMs) {
      next = delayMs;
      shedder.evaluate();
    },
    shedBy(priority) {
      const error = shedder.check(priority);
      if (!error) return undefined;
      expect(error.code).toBe('queue_full');
      if (error.message.includes('MAX_PENDING_ADMISSIONS')) return 'admissions';
      return error.message.includes('OVERLOAD_QUEUE_WAIT_MS') ? 'queue_wait' : 'event_loop';
    },
    observed,
    logs,
    advance(ms) {
      now += ms;
    },
  };
}

const shedPriorities = (s: Setup): Priority[] =>
  (['critical', 'high', 'normal', 'low'] as const).filter((p) => s.shedBy(p) !== undefined);

describe('LoadShedder: event-loop guard', () => {
  it('admits everything until two windows in a row are over OVERLOAD_DELAY_MS, then sheds low and normal', () => {
    const s = setup(100);
    expect(shedPriorities(s)).toEqual([]);
    s.window(150); // one slow window is a hiccup, not overload
    expect(shedPriorities(s)).toEqual([]);
    s.window(100); // at the threshold is not over it, and breaks the run
    s.window(150);
    expect(shedPriorities(s)).toEqual([]);
    s.window(150);
    expect(shedPriorities(s)).toEqual(['normal', 'low']);
    expect(s.observed.delays).toEqual([150, 100, 150, 150]);
  });

  it('sheds high only over twice the threshold, and never critical', () => {
    const s = setup(100);
    s.window(200);
    s.window(200);
    expect(shedPriorities(s)).toEqual(['normal', 'low']);
    s.window(201);
    expect(shedPriorities(s)).toEqual(['high', 'normal', 'low']);
    s.window(5000);
    expect(shedPriorities(s)).toEqual(['high', 'normal', 'low']);
  });

  it('stays overloaded until a window is under half the threshold (hysteresis)', () => {
    const s = setup(100);
    s.window(120);
    s.window(120);
    s.window(80);
    expect(shedPriorities(s)).toEqual(['normal', 'low']);
    s.window(50); // half is not under half
    expect(shedPriorities(s)).toEqual(['normal', 'low']);
    s.window(49);
    expect(shedPriorities(s)).toEqual([]);
    s.window(99); // re-entering needs windows over the threshold again
    expect(shedPriorities(s)).toEqual([]);
    s.window(101);
    s.window(101);
    expect(shedPriorities(s)).toEqual(['normal', 'low']);
  });

  it('answers with the delay, the threshold and a retry_after_ms scaled to the delay', () => {
    const s = setup(100);
    s.window(180);
    s.window(180);
    const error = s.shedder.check('low');
    expect(error?.message).toBe('bridge overloaded (event-loop delay 180 ms, OVERLOAD_DELAY_MS 100): retry later');
    expect(error?.retryAfterMs).toBe(1800);
    s.window(101);
    expect(s.shedder.check('low')?.retryAfterMs).toBe(1010);
    s.window(60_000);
    expect(s.shedder.check('low')?.retryAfterMs).toBe(10_000);
  });

  it('is off with OVERLOAD_DELAY_MS 0, whatever the delay', () => {
    const s = setup(0);
    s.window(10_000);
    expect(shedPriorities(s)).toEqual([]);
    expect(s.observed.delays).toEqual([]);
  });
});

describe('LoadShedder: admissions in flight', () => {
  it('sheds every priority, critical included, at MAX_PENDING_ADMISSIONS, and admits again below it', () => {
    const s = setup(100, 2);
    s.shedder.admissionStarted();
    expect(shedPriorities(s)).toEqual([]);
    s.shedder.admissionStarted();
    expect(s.shedder.pendingAdmissions).toBe(2);
    expect((['critical', 'high', 'normal', 'low'] as const).map((p) => s.shedBy(p))).toEqual([
      'admissions',
      'admissions',
      'admissions',
      'admissions',
    ]);
    expect(s.shedder.check('critical')?.retryAfterMs).toBe(1000);
    s.shedder.admissionEnded();
    expect(shedPriorities(s)).toEqual([]);
  });

  it('counts sheds by priority and reason for the metrics', () => {
    const s = setup(100, 1);
    s.window(150);
    s.window(150);
    s.shedder.check('low');
    s.shedder.check('critical');
    s.shedder.admissionStarted();
    s.shedder.check('critical');
    expect(s.observed.shed).toEqual([
      ['low', 'event_loop'],
      ['critical', 'admissions'],
    ]);
  });
});

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
    waitWindow(s, [['normal', 1200], ['normal', 1300]]);
    expect(shedPriorities(s)).toEqual(['normal', 'low']);
    expect(shedPriorities(s).map((p) => s.shedBy(p))).toEqual(['queue_wait', 'queue_wait']);
  });

  it('reads the shortest wait of a window: one job put back after a crash does not trip it', () => {
    const s = setup(100, 1000, 1000);
    waitWindow(s, [['normal', 60_000], ['normal', 20]]);
    expect(shedPriorities(s)).toEqual([]);
  });

  it('sheds a priority for its own wait and for the wait of those above it, high only over twice, never critical', () => {
    const low = setup(100, 1000, 1000);
    waitWindow(low, [['low', 5000], ['normal', 10]]);
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
    waitWindow(s, [['normal', 1800.4], ['low', 700]]);
    expect(s.shedder.check('normal')?.message).toBe('bridge overloaded (queue wait 1800 ms, OVERLOAD_QUEUE_WAIT_MS 1000): retry later');
    expect(s.shedder.check('normal')?.retryAfterMs).toBe(1800);
    // low is shed for normal's wait (its own is under the threshold).
    expect(s.shedder.check('low')?.message).toContain('queue wait 1800 ms');
    waitWindow(s, [['normal', 60_000], ['low', 60_000]]);
    expect(s.shedder.check('low')?.retryAfterMs).toBe(10_000);
    expect(s.observed.shed.filter(([, reason]) => reason === 'queue_wait').length).toBe(4);
    const short = setup(100, 1000, 300);
    waitWindow(short, [['normal', 400]]);
    expect(short.shedder.check('normal')?.retryAfterMs).toBe(1000);
  });

  it('is off by default and with OVERLOAD_QUEUE_WAIT_MS 0', () => {
    const s = setup(100, 1000, 0);
    for (let i = 0; i < 5; i += 1) waitWindow(s, [['normal', 60_000], ['low', 60_000]]);
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

describe('LoadShedder: logging', () => {
  it('logs one summary per second while shedding and one line when it stops', () => {
    const s = setup(100);
    s.window(150);
    s.window(150);
    for (let i = 0; i < 50; i += 1) s.shedder.check('low');
    s.shedder.check('normal');
    s.advance(200);
    s.window(150);
    expect(s.logs.map((l) => l.msg)).toEqual(['shedding load']);
    expect(s.logs[0]?.level).toBe(40);
    expect(s.logs[0]?.shed).toEqual({ event_loop: { low: 50, normal: 1 } });

    // Within the second: counted, not logged.
    s.shedder.check('low');
    s.advance(200);
    s.window(150);
    expect(s.logs).toHaveLength(1);
    s.shedder.check('low');
    s.advance(800);
    s.window(150);
    expect(s.logs.map((l) => l.msg)).toEqual(['shedding load', 'shedding load']);
    expect(s.logs[1]?.shed).toEqual({ event_loop: { low: 2 } });

    s.shedder.check('low');
    s.advance(200);
    s.window(10); // the window ends overload; its one shed is reported by the closing line
    s.advance(200);
    s.window(10);
    expect(s.logs.map((l) => l.msg)).toEqual(['shedding load', 'shedding load', 'load shedding stopped']);
    expect(s.logs[2]).toMatchObject({ level: 30, shed: { event_loop: { low: 1 } }, episodeShed: 54 });
    s.advance(2000);
    s.window(10);
    expect(s.logs).toHaveLength(3);
  });
});
