// The event-loop guard reads the bridge's own backlog as well as the delay: a window counts
// towards overload only when the loop was late AND busy running the bridge's callbacks at least
// half of it (its event-loop utilization). Late but idle is a machine whose CPU another program
// took: nothing is shed. Injected windows and clock, no real timers.
import { describe, expect, it } from 'vitest';
import type { Priority } from '../../contract/index.js';
import { LoadShedder, type DelaySource } from '../../bridge/intake/overload.js';
import { createLogger } from '../../bridge/logger.js';

/** A shedder whose windows are (delay, busy share) pairs given by hand. */
function shedderWithWindows(overloadDelayMs = 100): { window(delayMs: number, busy: number): void; shed(): Priority[]; logs: Array<Record<string, unknown>> } {
  let reading = { delayMs: 0, busy: 0 };
  const source: DelaySource = { takeWindowMs: () => reading.delayMs, busyShare: () => reading.busy, close: () => undefined };
  const logs: Array<Record<string, unknown>> = [];
  const logger = createLogger('info', { write: (line: string) => logs.push(JSON.parse(line) as Record<string, unknown>) } as unknown as NodeJS.WritableStream);
  let now = 0;
  const shedder = new LoadShedder({ overloadDelayMs, maxPendingAdmissions: 1000, logger, delaySource: source, clock: () => now });
  return {
    window(delayMs, busy) {
      reading = { delayMs, busy };
      now += 200;
      shedder.evaluate();
    },
    shed: () => (['critical', 'high', 'normal', 'low'] as const).filter((p) => shedder.check(p) !== undefined),
    logs,
  };
}

describe("LoadShedder: the event-loop guard follows the bridge's own backlog", () => {
  it('sheds nothing while the loop is late but idle (another program has the CPU), however late', () => {
    const s = shedderWithWindows();
    for (const delayMs of [300, 350, 900, 250, 5000]) {
      s.window(delayMs, 0.05);
      expect(s.shed()).toEqual([]);
    }
    expect(s.logs).toEqual([]);
  });

  it('sheds as before when the loop is late and busy with its own work', () => {
    const s = shedderWithWindows();
    s.window(300, 0.9);
    expect(s.shed()).toEqual([]); // one window is a hiccup
    s.window(300, 0.9);
    expect(s.shed()).toEqual(['high', 'normal', 'low']);
  });

  it('needs two late and busy windows in a row: an idle one between breaks the run', () => {
    const s = shedderWithWindows();
    s.window(150, 0.8);
    s.window(150, 0.2);
    s.window(150, 0.8);
    expect(s.shed()).toEqual([]);
    s.window(150, 0.5); // half the window busy is enough
    expect(s.shed()).toEqual(['normal', 'low']);
  });

  it('keeps shedding while busy over a quarter of the window, and stops once the loop is idle (or quick) again', () => {
    const s = shedderWithWindows();
    s.window(150, 0.9);
    s.window(150, 0.9);
    s.window(150, 0.3); // shedding itself lightens the loop: still late, still partly busy
    expect(s.shed()).toEqual(['normal', 'low']);
    s.window(150, 0.2); // late but idle: its own work is done, the rest is the machine
    expect(s.shed()).toEqual([]);
    s.window(150, 0.9);
    s.window(150, 0.9);
    expect(s.shed()).toEqual(['normal', 'low']);
    s.window(40, 0.9); // quiet
    expect(s.shed()).toEqual([]);
  });

  it('says in its log line how busy the loop was', () => {
    const s = shedderWithWindows();
    s.window(200, 0.87);
    s.window(200, 0.87);
    s.shed();
    s.window(200, 0.87);
    expect(s.logs[0]).toMatchObject({ msg: 'shedding load', eventLoopDelayMs: 200, eventLoopBusy: 0.87 });
  });
});
