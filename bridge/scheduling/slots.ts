// The slots: at most MAX_CONCURRENCY jobs in flight here, some of the free ones reserved by
// admissions that carry a claim (claimAlong) until they come back (adopt), and by the pump's
// claim until its jobs start.

/**
 * Most free slots one admission reserves for the claim it carries: enough to take a burst
 * in one step, while other admissions in flight at the same moment can still carry theirs.
 */
const CLAIM_ALONG_MAX = 16;

export class Slots {
  /** Slots reserved by admissions carrying a claim (claimAlong → adopt) and by the pump's claim. */
  private reserved = 0;
  /** A pump found every free slot reserved: pump again when the reservation ends. */
  private deferred = false;
  /**
   * Whether the queue may hold work waiting for one of our slots: set when a claim was cut
   * short by our capacity or an admission found no free slot, cleared by a claim that took
   * less than it could.
   */
  backlog = true;

  constructor(
    private readonly max: number,
    private readonly inFlight: () => number,
  ) {}

  free(): number {
    return this.max - this.inFlight() - this.reserved;
  }

  /** Reserves up to CLAIM_ALONG_MAX free slots for an admission's claim; 0 when none is free. */
  reserve(): number {
    const free = this.free();
    if (free <= 0) {
      this.backlog = true; // this admission waits in the queue for a slot
      return 0;
    }
    const count = Math.min(free, CLAIM_ALONG_MAX);
    this.reserved += count;
    return count;
  }

  /**
   * Reserves every free slot for the pump's claim: its jobs are not in flight until the claim
   * comes back, and an admission meanwhile must not take their slots too.
   */
  reserveAll(): number {
    const free = this.free();
    if (free > 0) this.reserved += free;
    return free;
  }

  /** An admission or the pump's claim came back: its reservation ends. */
  unreserve(count: number): void {
    this.reserved -= count;
  }

  /** A pump found no free slot. */
  full(): void {
    // Slots an admission reserved may come back unused: look again when they do.
    if (this.reserved > 0) this.deferred = true;
  }

  /** Whether a pump was deferred on reservations (and is no longer). */
  takeDeferred(): boolean {
    const deferred = this.deferred;
    this.deferred = false;
    return deferred;
  }
}
