// The deadline watch: at the deadline of a request still waiting here, one sweep (unless a
// claim since then already took the expired jobs out), merged with its neighbours, retried
// after a failure. Fake timers: the watch is pure timing logic around one callback.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DeadlineWatch, SWEEP_GAP_MS } from '../../bridge/recovery/deadlines.js';

const RETRY_MS = 1000;

describe('DeadlineWatch', () => {
  let sweeps: number[];
  let fail: boolean;
  let errors: unknown[];
  let watch: DeadlineWatch;

  beforeEach(() => {
    vi.useFakeTimers({ now: 1_000_000 });
    sweeps = [];
    fail = false;
    errors = [];
    watch = new DeadlineWatch({
      sweep: async () => {
        sweeps.push(Date.now());
        if (fail) throw new Error('store down');
      },
      clock: Date.now,
      retryMs: RETRY_MS,
      onError: (err) => errors.push(err),
    });
  });

  afterEach(() => {
    watch.stop();
    vi.useRealTimers();
  });

  const t0 = 1_000_000;

  it('sweeps at the deadline of a job still waiting, and not before', async () => {
    watch.watch('a', t0 + 300);
    await vi.advanceTimersByTimeAsync(299);
    expect(sweeps).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(sweeps).toEqual([t0 + 300]);
    expect(watch.size).toBe(0);
  });

  it('does not sweep for a job claimed or answered here before its deadline', async () => {
    watch.watch('a', t0 + 100);
    watch.watch('b', t0 + 200);
    watch.settle('a');
    watch.settle('b');
    await vi.advanceTimersByTimeAsync(500);
    expect(sweeps).toEqual([]);
  });

  it('does not sweep when a claim started after the deadline (it took the expired jobs out)', async () => {
    watch.watch('a', t0 + 100);
    watch.watch('b', t0 + 400);
    await vi.advanceTimersByTimeAsync(50);
    watch.claimStarted(t0 + 50); // before a's deadline: does not cover it
    await vi.advanceTimersByTimeAsync(50);
    expect(sweeps).toEqual([t0 + 100]);
    await vi.advanceTimersByTimeAsync(250);
    watch.claimStarted(t0 + 420); // not yet at that time, but covers b's deadline once it comes
    await vi.advanceTimersByTimeAsync(100);
    expect(sweeps).toEqual([t0 + 100]);
  });

  it('merges deadlines closer than the gap into one sweep, and keeps the earliest first', async () => {
    watch.watch('late', t0 + 1000);
    watch.watch('a', t0 + 100);
    watch.watch('b', t0 + 105);
    watch.watch('c', t0 + 100 + SWEEP_GAP_MS - 1);
    await vi.advanceTimersByTimeAsync(2000);
    // b and c fall due within the gap after a's sweep: one sweep at its end takes both.
    expect(sweeps).toEqual([t0 + 100, t0 + 100 + SWEEP_GAP_MS, t0 + 1000]);
  });

  it('tries a failed sweep again after retryMs', async () => {
    fail = true;
    watch.watch('a', t0 + 100);
    await vi.advanceTimersByTimeAsync(100);
    expect(errors).toHaveLength(1);
    fail = false;
    await vi.advanceTimersByTimeAsync(RETRY_MS);
    expect(sweeps).toEqual([t0 + 100, t0 + 100 + RETRY_MS]);
    await vi.advanceTimersByTimeAsync(5000);
    expect(sweeps).toHaveLength(2);
  });

  it('sweeps no more once stopped', async () => {
    watch.watch('a', t0 + 100);
    watch.stop();
    watch.watch('b', t0 + 200);
    await vi.advanceTimersByTimeAsync(1000);
    expect(sweeps).toEqual([]);
  });
});
