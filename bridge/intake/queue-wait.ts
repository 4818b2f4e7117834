// The queue-wait overload guard (OVERLOAD_QUEUE_WAIT_MS, opt-in; LoadShedder asks it). When
// the upstream is the bottleneck the event loop stays quick and the queue absorbs the excess
// up to QUEUE_MAX, so every reply comes seconds late. Two readings of the wait, per priority,
// refuse new work of a priority (and of those below it) instead of letting it join the wait:
//
// - measured: how long the jobs this instance starts had waited. Exact, but one wait late;
// - estimated: the jobs queued ahead of a new request over the fleet's capacity. It acts on a
//   burst before any of it has waited, but it knows only slots: an instance short of CPU
//   rather than of slots is left to the measured reading.
//
// `critical` is never refused; `high` only over twice the threshold (as the event-loop guard).
import { type BridgeError, overloaded, PRIORITIES, type Priority } from '../../contract/index.js';
import type { QueueDepth } from '../store/port.js';

/** What the estimate reads: the queue once per window, the capacity whenever asked. */
export interface QueueEstimate {
  /** Jobs waiting in the fleet's queue, by priority (the store). */
  depth(): Promise<QueueDepth>;
  /** Jobs the fleet starts per second with every slot busy; undefined while unknown. */
  capacityPerS(): number | undefined;
}

type Sheddable = Exclude<Priority, 'critical'>;
const SHEDDABLE: readonly Sheddable[] = ['high', 'normal', 'low'];
/** The priorities whose long wait refuses a new request of this one: its own and those above it. */
const REFUSED_FOR: Record<Sheddable, readonly Sheddable[]> = { high: ['high'], normal: ['high', 'normal'], low: ['high', 'normal', 'low'] };

/** Hysteresis: over the threshold to enter, under half of it to leave. */
function over(was: boolean, waitMs: number | undefined, thresholdMs: number): boolean {
  if (waitMs === undefined || waitMs < thresholdMs / 2) return false;
  return waitMs > thresholdMs ? true : was;
}

/**
 * The measured reading of one priority, window by window: the window's shortest wait of the
 * claimed jobs. Jobs of one priority are claimed in arrival order, so the shortest is the
 * newest; a job put back after its instance died keeps its arrival time and would make the
 * longest meaningless. Being a minimum over the window's claims, one window over the threshold
 * is evidence enough: the reading is already a whole wait late.
 */
class MeasuredWait {
  private shortestMs = Infinity;
  over = false;
  /** The last window's reading (0 when it measured nothing). */
  waitMs = 0;

  claimed(waitMs: number): void {
    if (waitMs < this.shortestMs) this.shortestMs = waitMs;
  }

  forget(): void {
    this.shortestMs = Infinity;
    this.over = false;
  }

  /**
   * A window with no claim, or one in which the claims were held back on purpose (the upstream
   * rate budget or a 429 pause), measures nothing and leaves the state: a priority whose new
   * work is all refused is admitted again once its queue ran dry, never refused for good.
   */
  close(thresholdMs: number, held: boolean): void {
    const waitMs = held || this.shortestMs === Infinity ? undefined : this.shortestMs;
    this.shortestMs = Infinity;
    this.waitMs = waitMs ?? 0;
    this.over = over(this.over, waitMs, thresholdMs);
  }
}

export class QueueWaitGuard {
  private readonly measured: Record<Sheddable, MeasuredWait> = { high: new MeasuredWait(), normal: new MeasuredWait(), low: new MeasuredWait() };
  /** A claim in this window was held back by the rate budget or a pause. */
  private held = false;
  /** Per priority, built once per window: refusing must stay cheap. */
  private measuredErrors: Partial<Record<Sheddable, BridgeError>> = {};

  // The estimate: the queue as last read, corrected by what this instance admitted and claimed
  // since that read started (other instances' changes show at the next read, a window later).
  private depth: QueueDepth | undefined;
  private sinceRead = zero();
  private sinceReadStarted = zero();
  private reading = false;
  private capacityPerS: number | undefined;
  private readonly estimatedOver: Record<Sheddable, boolean> = { high: false, normal: false, low: false };
  private readonly estimatedErrors: Partial<Record<Sheddable, BridgeError>> = {};
  private lastEstimateMs: Record<Sheddable, number> = { high: 0, normal: 0, low: 0 };

  constructor(
    private readonly thresholdMs: number,
    private readonly estimate?: QueueEstimate,
  ) {}

  /**
   * The error to refuse a request of this priority with now, if any. `admitting`: requests let
   * through whose admission has not answered yet; a burst read from one socket is checked
   * before any of it is queued, so they count as ahead (whatever their priority).
   */
  check(priority: Priority, admitting: number): BridgeError | undefined {
    if (priority === 'critical') return undefined;
    return this.measuredErrors[priority] ?? this.estimated(priority, admitting);
  }

  /** A job was queued by this instance (it stops counting as admitting at the same time). */
  admitted(priority: Priority): void {
    this.sinceRead[priority] += 1;
    this.sinceReadStarted[priority] += 1;
  }

  /** A job was claimed by this instance after `waitMs` in the queue; one that names a lock waited for it on purpose. */
  claimed(priority: Priority, waitMs: number, locked: boolean): void {
    this.sinceRead[priority] -= 1;
    this.sinceReadStarted[priority] -= 1;
    if (priority !== 'critical' && !locked) this.measured[priority].claimed(waitMs);
  }

  claimHeld(): void {
    this.held = true;
  }

  /**
   * A claim took less than it asked for: nothing waits, whatever was read or measured before.
   * Called for most requests when the bridge is not busy, so it allocates nothing.
   */
  queueDrained(): void {
    for (const priority of SHEDDABLE) {
      this.measured[priority].forget();
      this.estimatedOver[priority] = false;
      this.measuredErrors[priority] = undefined;
    }
    for (const priority of PRIORITIES) {
      if (this.depth) this.depth[priority] = 0;
      this.sinceRead[priority] = 0;
    }
  }

  /** Ends a window: the measured states move, the queue is read again, the capacity asked. */
  evaluate(): void {
    for (const priority of SHEDDABLE) this.measured[priority].close(this.thresholdMs, this.held);
    this.held = false;
    this.measuredErrors = {};
    for (const priority of SHEDDABLE) {
      const refusing = REFUSED_FOR[priority].map((p) => this.measured[p]).filter((m) => m.over && (priority !== 'high' || m.waitMs > 2 * this.thresholdMs));
      if (refusing.length > 0) this.measuredErrors[priority] = this.error(Math.max(...refusing.map((m) => m.waitMs)));
    }
    if (this.estimate) {
      this.capacityPerS = this.estimate.capacityPerS();
      this.read(this.estimate);
      // Rebuilt with the current figure while refusing, so a reply says what it is refused for now.
      for (const priority of SHEDDABLE) this.estimatedErrors[priority] = undefined;
    }
  }

  /** Whether either reading refuses anything (for the log line that ends an episode). */
  get refusing(): boolean {
    return SHEDDABLE.some((p) => this.measured[p].over || this.estimatedOver[p]);
  }

  /** The last readings, for the log. */
  readings(): { measuredMs: Record<Sheddable, number>; estimatedMs: Record<Sheddable, number> } {
    const round = (f: (p: Sheddable) => number): Record<Sheddable, number> => ({
      high: Math.round(f('high')),
      normal: Math.round(f('normal')),
      low: Math.round(f('low')),
    });
    return { measuredMs: round((p) => this.measured[p].waitMs), estimatedMs: round((p) => this.lastEstimateMs[p]) };
  }

  private estimated(priority: Sheddable, admitting: number): BridgeError | undefined {
    const capacity = this.capacityPerS;
    const depth = this.depth;
    if (!depth || !capacity || !(capacity > 0)) return undefined;
    let ahead = admitting;
    for (const p of PRIORITIES) {
      ahead += Math.max(0, depth[p] + this.sinceRead[p]);
      if (p === priority) break;
    }
    const waitMs = (ahead / capacity) * 1000;
    this.lastEstimateMs[priority] = waitMs;
    const threshold = priority === 'high' ? 2 * this.thresholdMs : this.thresholdMs;
    this.estimatedOver[priority] = over(this.estimatedOver[priority], waitMs, threshold);
    if (!this.estimatedOver[priority]) return undefined;
    return (this.estimatedErrors[priority] ??= this.error(waitMs));
  }

  private read(estimate: QueueEstimate): void {
    if (this.reading) return;
    this.reading = true;
    this.sinceReadStarted = zero();
    estimate.depth().then(
      (depth) => {
        this.depth = depth;
        this.sinceRead = { ...this.sinceReadStarted };
        this.reading = false;
      },
      () => {
        this.depth = undefined; // a silent store: no estimate until it answers again
        this.reading = false;
      },
    );
  }

  private error(waitMs: number): BridgeError {
    return overloaded(`queue wait ${Math.round(waitMs)} ms, OVERLOAD_QUEUE_WAIT_MS ${this.thresholdMs}`, waitMs);
  }
}

function zero(): Record<Priority, number> {
  return { critical: 0, high: 0, normal: 0, low: 0 };
}
