// The deadlines (ttl_ms, MQTT 5 Message Expiry) of the requests this instance queued. A claim
// takes the queue's expired jobs out and they are answered `expired`, but claims run when a
// slot is free and the rate budget allows: with every slot busy on a slow upstream, or claims
// held back by RATE_LIMIT_RPM, an expired request would wait seconds for its answer. So at a
// watched deadline, unless a claim has run since, a sweep runs (a claim of no jobs, which
// still takes the expired ones out): the answer comes within a few ms of the deadline.
import { type Deadline, DeadlineHeap } from '../store/deadline-heap.js';

/**
 * Sweeps closer together than this are merged into one: the promise is the deadline + 100 ms,
 * and under a flood of deadlines a sweep per deadline would cost a store call per request.
 */
export const SWEEP_GAP_MS = 20;

export interface DeadlineWatchOptions {
  /** Takes the expired jobs out of the queue and answers them; rejects when the store failed. */
  sweep: () => Promise<void>;
  clock: () => number;
  /** After a failed sweep, the next one waits this long. */
  retryMs: number;
  onError: (err: unknown) => void;
}

export class DeadlineWatch {
  /** Entries of settled jobs are skipped when they come up. */
  private readonly heap = new DeadlineHeap();
  /** Jobs queued here and not yet claimed or answered here, by key: their deadline. */
  private readonly watched = new Map<string, number>();
  /** When the latest claim of the pump or a sweep started (an admission's may not run at all). */
  private claimedAt = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Number.POSITIVE_INFINITY;
  private sweptAt = Number.NEGATIVE_INFINITY;
  private sweeping = false;
  private stopped = false;

  constructor(private readonly options: DeadlineWatchOptions) {}

  /** A job was queued here with this deadline. */
  watch(key: string, deadlineMs: number): void {
    if (this.stopped) return;
    this.watched.set(key, deadlineMs);
    this.heap.push({ at: deadlineMs, key });
    this.arm(deadlineMs);
  }

  /** The job was claimed or answered here: its deadline needs no sweep. */
  settle(key: string): void {
    this.watched.delete(key);
  }

  /** A claim started now: it takes out every job whose deadline has passed by now. */
  claimStarted(now: number): void {
    this.claimedAt = now;
  }

  get size(): number {
    return this.watched.size;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Makes sure a timer fires at `at`, or SWEEP_GAP_MS after the last sweep if that is later. */
  private arm(deadline: number): void {
    const at = Math.max(deadline, this.sweptAt + SWEEP_GAP_MS);
    if (this.stopped || this.sweeping || at >= this.timerAt) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => void this.fire(), Math.max(0, at - this.options.clock()));
  }

  private async fire(): Promise<void> {
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    const now = this.options.clock();
    // Due and still waiting here, and no claim since its deadline already took it out.
    let due: Deadline[] = [];
    while ((this.heap.peek()?.at ?? Infinity) <= now) {
      const entry = this.heap.pop() as Deadline;
      if (this.watched.get(entry.key) !== entry.at) continue;
      this.watched.delete(entry.key);
      if (entry.at > this.claimedAt) due.push(entry);
    }
    if (due.length > 0) {
      this.sweeping = true;
      this.claimedAt = now;
      this.sweptAt = now;
      try {
        await this.options.sweep();
        due = [];
      } catch (err) {
        this.options.onError(err);
      } finally {
        this.sweeping = false;
      }
    }
    if (this.stopped) return;
    // A failed sweep is tried again; the next deadlines wait for the gap after this sweep.
    const retryAt = now + this.options.retryMs;
    for (const entry of due) this.watch(entry.key, retryAt);
    const next = this.heap.peek();
    if (next !== undefined) this.arm(next.at);
  }
}
