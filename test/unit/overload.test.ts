// The LoadShedder's event-loop guard, its cap on admissions in flight, and its logging, with
// injected event-loop windows and clock: no real timers.
import { describe, expect, it } from 'vitest';
import { setup, shedPriorities } from '../helpers/load-shedder.js';

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
    expect((['critical', 'high', 'normal', 'low'] as const).map((p) => s.shedBy(p))).toEqual(['admissions', 'admissions', 'admissions', 'admissions']);
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
