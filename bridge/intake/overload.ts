// Load shedding at intake. Past its capacity the bridge answers `queue_full` at once instead of
// admitting work it cannot serve in time: otherwise event-loop delay, memory and reply latency
// all climb together until replies go missing. Three guards, all asked before the store is
// touched:
// - event-loop delay, measured per window, while the loop is busy with the bridge's own work: a
//   saturated loop delays every request it already holds, so new low-value work is refused first
//   (priority-aware, with hysteresis). A loop that is late only because another program has the
//   CPU, and otherwise idle, is not overloaded: refusing its few requests would free nothing;
// - admissions in flight: with a slow store (Redis), requests waiting for their admission
//   pile up in memory whatever the loop does, so their number is bounded (every priority);
// - queue wait (opt-in, queue-wait.ts): when the upstream is the bottleneck the loop stays
//   quick while the queue absorbs the excess, and every reply comes seconds late.
import { type EventLoopUtilization, monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { type BridgeError, overloaded, type Priority } from '../../contract/index.js';
import type { Logger } from '../logger.js';
import { QueueWaitGuard, type QueueEstimate } from './queue-wait.js';

export type ShedReason = 'event_loop' | 'admissions' | 'queue_wait';

/** The event-loop delay of consecutive windows. */
export interface DelaySource {
  /** The largest delay (ms) seen since the previous call, which starts a new window. */
  takeWindowMs(): number;
  /**
   * The share (0 to 1) of the window last taken that the bridge spent on its own work: the loop
   * running callbacks rather than waiting for I/O (its event-loop utilization), and the process
   * on a CPU meanwhile. Absent: unknown, every delay counts as the bridge's own.
   */
  busyShare?(): number;
  close(): void;
}

export interface OverloadObserver {
  shed(priority: Priority, reason: ShedReason): void;
  eventLoopDelay(ms: number): void;
}

export interface LoadShedderOptions {
  /** OVERLOAD_DELAY_MS; 0 turns the event-loop guard off. */
  overloadDelayMs: number;
  /** MAX_PENDING_ADMISSIONS. */
  maxPendingAdmissions: number;
  /** OVERLOAD_QUEUE_WAIT_MS; 0 (the default) turns the queue-wait guard off. */
  overloadQueueWaitMs?: number;
  /** Without it, the queue-wait guard only measures. */
  queueEstimate?: QueueEstimate;
  logger: Logger;
  observer?: OverloadObserver;
  /** Tests inject windows; by default start() measures the real loop. */
  delaySource?: DelaySource;
  clock?: () => number;
}

/** Short enough to react within a fraction of a second, long enough to hold ~20 samples. */
export const WINDOW_MS = 200;
/** The histogram's sampling period: finer would cost timer wake-ups for nothing we act on. */
const RESOLUTION_MS = 10;
/**
 * One slow window is a GC pause, a burst of JIT compilation or a CPU-starved moment, not
 * overload (seen in tests: a 386 ms cold-start window shed a lone request); load that stays
 * shows in consecutive windows, and 400 ms is still quick to react.
 */
const WINDOWS_TO_ENTER = 2;
/**
 * A window counts towards overload only if the bridge was busy with its own work at least half
 * of it. A loop with a backlog of its own (requests read, admissions and replies waiting) never
 * waits for I/O and runs whenever it gets a CPU; a light load on a machine whose CPU another
 * program took leaves the loop late but idle: shedding it would not make it faster. Leaving
 * needs a quarter or less (or a quiet delay), so the state does not flap at the line.
 */
const BUSY_TO_ENTER = 0.5;
const SUMMARY_EVERY_MS = 1000;
/** A loop this far behind needs time to drain; retries spread over longer when it is further behind. */
const RETRY_AFTER_PER_DELAY_MS = 10;

/**
 * The window's maximum rather than its p99: a blocked loop also blocks the sampling timer, so a
 * 300 ms stall is ONE sample among the ~20 of a window, and the p99 of so few samples is the
 * maximum anyway. The maximum says it plainly, and it is what a request arriving during the
 * stall waited.
 *
 * The caller's own lateness counts too: after a stall, the histogram's timer may fire after the
 * caller's in the same loop turn, and the stall would otherwise be read one window late, after
 * the requests that queued up behind it were already let through.
 */
export function eventLoopDelaySource(windowMs: number): DelaySource {
  const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  histogram.enable();
  let windowStart = performance.now();
  let utilization = performance.eventLoopUtilization();
  let cpu = process.cpuUsage();
  let busy = 0;
  return {
    takeWindowMs() {
      const now = performance.now();
      const ms = Math.max(histogram.max / 1e6, now - windowStart - windowMs);
      histogram.reset();
      busy = busyShare(utilization, cpu, now - windowStart);
      windowStart = now;
      utilization = performance.eventLoopUtilization();
      cpu = process.cpuUsage();
      return ms;
    },
    busyShare: () => busy,
    close: () => histogram.disable(),
  };
}

/**
 * The lesser of the window's event-loop utilization and the process's CPU time over it. Either
 * alone is fooled: a process descheduled in the middle of a callback counts the wait as loop time,
 * and a process that computes on other threads (garbage collection) uses CPU with an idle loop.
 */
function busyShare(since: EventLoopUtilization, cpuSince: NodeJS.CpuUsage, windowMs: number): number {
  const loop = performance.eventLoopUtilization(performance.eventLoopUtilization(), since).utilization;
  const { user, system } = process.cpuUsage(cpuSince);
  return windowMs > 0 ? Math.min(loop, (user + system) / 1000 / windowMs) : 0;
}

/** Shed requests by reason, then priority, for the log. */
type Counts = Partial<Record<ShedReason, Partial<Record<Priority, number>>>>;

export class LoadShedder {
  private readonly options: LoadShedderOptions;
  private readonly clock: () => number;
  private source: DelaySource | undefined;
  private timer: NodeJS.Timeout | undefined;
  private delayMs = 0;
  private busy = 0;
  private overloaded = false;
  private windowsOver = 0;
  private readonly queueWait: QueueWaitGuard | undefined;
  /** Built once per window, not per shed request: shedding must stay cheap. */
  private eventLoopError: BridgeError | undefined;
  private readonly admissionsError: BridgeError;
  private pending = 0;
  // Logging: one summary line per SUMMARY_EVERY_MS while shedding, one line when it stops.
  private unlogged: Counts = {};
  private episodeShed = 0;
  private episodeStart = 0;
  private shedSinceTick = false;
  private lastSummaryAt = Number.NEGATIVE_INFINITY;

  constructor(options: LoadShedderOptions) {
    this.options = options;
    this.clock = options.clock ?? Date.now;
    this.source = options.delaySource;
    const waitMs = options.overloadQueueWaitMs ?? 0;
    this.queueWait = waitMs > 0 ? new QueueWaitGuard(waitMs, options.queueEstimate) : undefined;
    this.admissionsError = overloaded(`MAX_PENDING_ADMISSIONS ${options.maxPendingAdmissions} requests already wait for the store`, 0);
  }

  get pendingAdmissions(): number {
    return this.pending;
  }

  /** Measures the loop (unless the guard is off) and evaluates a window every WINDOW_MS. */
  start(): void {
    if (this.options.overloadDelayMs > 0) this.source ??= eventLoopDelaySource(WINDOW_MS);
    this.timer = setInterval(() => this.evaluate(), WINDOW_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.source?.close();
  }

  /** Ends a window: reads its delay and queue waits, moves the overload states, writes the log lines due. */
  evaluate(): void {
    const threshold = this.options.overloadDelayMs;
    if (threshold > 0 && this.source) {
      this.delayMs = this.source.takeWindowMs();
      this.busy = this.source.busyShare?.() ?? 1;
      this.options.observer?.eventLoopDelay(this.delayMs);
      this.windowsOver = this.delayMs > threshold && this.busy >= BUSY_TO_ENTER ? this.windowsOver + 1 : 0;
      // Hysteresis: leaving needs a clearly quiet or idle window, so the state does not flap at the line.
      if (this.windowsOver >= WINDOWS_TO_ENTER) this.overloaded = true;
      else if (this.delayMs < threshold / 2 || this.busy < BUSY_TO_ENTER / 2) this.overloaded = false;
      this.eventLoopError = this.overloaded
        ? overloaded(`event-loop delay ${Math.round(this.delayMs)} ms, OVERLOAD_DELAY_MS ${threshold}`, this.delayMs * RETRY_AFTER_PER_DELAY_MS)
        : undefined;
    }
    this.queueWait?.evaluate();
    this.logState();
  }

  /** The error to answer with when this request must be shed now; undefined to admit it. */
  check(priority: Priority): BridgeError | undefined {
    if (this.pending >= this.options.maxPendingAdmissions) return this.shed(priority, 'admissions', this.admissionsError);
    if (priority === 'critical') return undefined;
    const error = this.eventLoopError;
    if (error && (priority !== 'high' || this.delayMs > 2 * this.options.overloadDelayMs)) return this.shed(priority, 'event_loop', error);
    const waitError = this.queueWait?.check(priority, this.pending);
    return waitError && this.shed(priority, 'queue_wait', waitError);
  }

  /** The queue-wait guard's events (scheduler, intake); nothing when it is off. */
  claimed(priority: Priority, waitMs: number, locked: boolean): void {
    this.queueWait?.claimed(priority, waitMs, locked);
  }

  claimHeld(): void {
    this.queueWait?.claimHeld();
  }

  queueDrained(): void {
    this.queueWait?.queueDrained();
  }

  admitted(priority: Priority): void {
    this.queueWait?.admitted(priority);
  }

  /** Brackets a request's admission (store calls included), for MAX_PENDING_ADMISSIONS. */
  admissionStarted(): void {
    this.pending += 1;
  }

  admissionEnded(): void {
    this.pending -= 1;
  }

  private shed(priority: Priority, reason: ShedReason, error: BridgeError): BridgeError {
    this.options.observer?.shed(priority, reason);
    const byPriority = (this.unlogged[reason] ??= {});
    byPriority[priority] = (byPriority[priority] ?? 0) + 1;
    if (this.episodeShed === 0) this.episodeStart = this.clock();
    this.episodeShed += 1;
    this.shedSinceTick = true;
    return error;
  }

  private logState(): void {
    const now = this.clock();
    const context = {
      eventLoopDelayMs: Math.round(this.delayMs),
      eventLoopBusy: Math.round(this.busy * 100) / 100,
      pendingAdmissions: this.pending,
      ...(this.queueWait ? { queueWait: this.queueWait.readings() } : {}),
    };
    if (this.shedSinceTick) {
      this.shedSinceTick = false;
      if (now - this.lastSummaryAt >= SUMMARY_EVERY_MS) {
        this.options.logger.warn({ ...context, shed: this.unlogged }, 'shedding load');
        this.unlogged = {};
        this.lastSummaryAt = now;
      }
    } else if (this.episodeShed > 0 && !this.overloaded && !this.queueWait?.refusing) {
      this.options.logger.info({ ...context, shed: this.unlogged, episodeShed: this.episodeShed, episodeMs: now - this.episodeStart }, 'load shedding stopped');
      this.unlogged = {};
      this.episodeShed = 0;
    }
  }
}
