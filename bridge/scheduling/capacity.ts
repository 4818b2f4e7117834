// The capacity estimate the queue-wait guard divides the queue by: how fast the fleet's slots
// turn over, from how long a job holds one here.

/** The weight of the latest job in meanHoldMs: about the last 20 jobs count. */
const HOLD_SMOOTHING = 0.05;

export class HoldTime {
  private meanHoldMs: number | undefined;

  /** A job held its slot `heldMs`, claim to reply. */
  record(heldMs: number): void {
    this.meanHoldMs = this.meanHoldMs === undefined ? heldMs : this.meanHoldMs + HOLD_SMOOTHING * (heldMs - this.meanHoldMs);
  }

  /** Jobs `instances` × `slots` start per second with every slot busy; undefined before the first job ended. */
  capacityPerS(instances: number | undefined, slots: number): number | undefined {
    if (!instances || this.meanHoldMs === undefined || !(this.meanHoldMs > 0)) return undefined;
    return (instances * slots * 1000) / this.meanHoldMs;
  }
}
