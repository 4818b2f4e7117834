// A LoadShedder driven by hand for its unit tests: event-loop windows and the clock are
// injected (no real timers); sheds, delays and log lines are recorded.
import { expect } from 'vitest';
import type { Priority } from '../../contract/index.js';
import { createLogger } from '../../bridge/logger.js';
import { LoadShedder, type DelaySource, type ShedReason } from '../../bridge/intake/overload.js';
import type { QueueEstimate } from '../../bridge/intake/queue-wait.js';

export interface Setup {
  shedder: LoadShedder;
  /** Ends a window in which the loop was at most this late. */
  window(delayMs: number): void;
  shedBy(priority: Priority): ShedReason | undefined;
  observed: { shed: Array<[Priority, ShedReason]>; delays: number[] };
  logs: Array<{ level: number; msg: string; shed?: unknown; episodeShed?: number }>;
  advance(ms: number): void;
}

export function setup(overloadDelayMs = 100, maxPendingAdmissions = 1000, overloadQueueWaitMs = 0, queueEstimate?: QueueEstimate): Setup {
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

export const shedPriorities = (s: Setup): Priority[] => (['critical', 'high', 'normal', 'low'] as const).filter((p) => s.shedBy(p) !== undefined);
