/**
 * Events are counted in buckets of this size, bucket n holding the times in ((n-1)·B, n·B]:
 * one counts until its whole bucket has left the window, so a slot frees at most one bucket
 * late. The Redis store keeps one field per bucket (lua/includes/window.lua); the memory store
 * rounds the same way, so both answer alike.
 */
export const BUCKET_MS = 2000;

/**
 * A rolling-window log of weighted events: "at most N in any 60 s" holds exactly, unlike a
 * fixed window, which admits 2N across a boundary. An event's time is its bucket's end.
 */
export class SlidingWindow {
  private times: number[] = [];
  private weights: number[] = [];
  /** Rising ids, so an event can be found again (to correct its weight) by binary search. */
  private ids: number[] = [];
  private nextId = 1;
  private head = 0;
  private total = 0;

  constructor(
    private readonly windowMs: number,
    private readonly bucketMs = BUCKET_MS,
  ) {}

  /** Records an event; returns its id. */
  add(now: number, weight: number): number {
    const id = this.nextId++;
    this.times.push(Math.ceil(now / this.bucketMs) * this.bucketMs);
    this.weights.push(weight);
    this.ids.push(id);
    this.total += weight;
    return id;
  }

  /** Corrects the weight of an event still in the window (a no-op once it has left). */
  setWeight(id: number, weight: number): void {
    let lo = this.head;
    let hi = this.ids.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const at = this.ids[mid] as number;
      if (at === id) {
        this.total += weight - (this.weights[mid] as number);
        this.weights[mid] = weight;
        return;
      }
      if (at < id) lo = mid + 1;
      else hi = mid - 1;
    }
  }

  count(now: number): number {
    this.evict(now);
    return this.times.length - this.head;
  }

  weight(now: number): number {
    this.evict(now);
    return this.total;
  }

  /** The earliest time at which fewer than `limit` events remain in the window. */
  freeAt(limit: number, now: number): number {
    this.evict(now);
    const excess = this.times.length - this.head - limit;
    if (excess < 0) return now;
    return (this.times[this.head + excess] as number) + this.windowMs;
  }

  /** The earliest time at which the window's weight is at most `maxWeight`. */
  weightFreeAt(maxWeight: number, now: number): number {
    this.evict(now);
    let weight = this.total;
    for (let i = this.head; i < this.times.length; i += 1) {
      if (weight <= maxWeight) return i === this.head ? now : (this.times[i - 1] as number) + this.windowMs;
      weight -= this.weights[i] as number;
    }
    return this.times.length > this.head ? (this.times.at(-1) as number) + this.windowMs : now;
  }

  private evict(now: number): void {
    const cutoff = now - this.windowMs;
    while (this.head < this.times.length && (this.times[this.head] as number) <= cutoff) {
      this.total -= this.weights[this.head] as number;
      this.head += 1;
    }
    // Compact now and then so the arrays do not grow without bound.
    if (this.head > 1024 && this.head * 2 > this.times.length) {
      this.times = this.times.slice(this.head);
      this.weights = this.weights.slice(this.head);
      this.ids = this.ids.slice(this.head);
      this.head = 0;
    }
  }
}
