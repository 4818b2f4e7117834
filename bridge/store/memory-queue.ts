// The memory store's waiting jobs: per priority class, one list in claim order (by score,
// then admission) and each waiting device's lane with its service counter. The next job is
// from the class whose head has the best score (priority with aging, as without fair
// share), taken from the lane of the device with the least service counted in that class
// (Virtual Token Counter; between equal counters, the device whose next job comes first). A device
// that starts waiting takes the smallest counter of the class's waiting devices, so time
// spent idle is no credit; one that stops waiting leaves its counter behind.
import { PRIORITIES, type Priority } from '../../contract/index.js';
import type { Job } from '../model/job.js';

export interface Queued {
  job: Job;
  seq: number;
}

export const before = (a: Queued, b: Queued): boolean => a.job.score < b.job.score || (a.job.score === b.job.score && a.seq < b.seq);

interface Lane {
  counter: number;
  /** The device's waiting jobs of the class, next first. */
  items: Queued[];
}

export class ReadyQueue {
  /** `fairShare` false (FAIR_SHARE=false): no lanes, the best score is the next. */
  constructor(private readonly fairShare = true) {}

  /** Each class's waiting jobs, sorted with the next LAST, so taking a head is a pop. */
  private readonly classes = Object.fromEntries(PRIORITIES.map((p) => [p, [] as Queued[]])) as Record<Priority, Queued[]>;
  private readonly lanes = Object.fromEntries(PRIORITIES.map((p) => [p, new Map<string, Lane>()])) as Record<Priority, Map<string, Lane>>;

  get length(): number {
    return PRIORITIES.reduce((n, p) => n + this.classes[p].length, 0);
  }

  /** Every waiting job, in no particular order. */
  values(): Queued[] {
    return PRIORITIES.flatMap((p) => this.classes[p]);
  }

  /**
   * The job a claim takes next: from the class whose head has the best score, the fair pick;
   * but never one that another class's head should go before (the aging guarantee), so then
   * the class's head.
   */
  next(): Queued | undefined {
    // The best and second-best class heads, without building a list per claim.
    let top: Queued | undefined;
    let runnerUp: Queued | undefined;
    for (const p of PRIORITIES) {
      const head = this.classes[p].at(-1);
      if (!head) continue;
      if (!top || before(head, top)) [top, runnerUp] = [head, top];
      else if (!runnerUp || before(head, runnerUp)) runnerUp = head;
    }
    if (!top || !this.fairShare) return top;
    let best: Lane | undefined;
    for (const lane of this.lanes[top.job.priority].values()) {
      if (!best || lane.counter < best.counter || (lane.counter === best.counter && before(lane.items[0] as Queued, best.items[0] as Queued))) best = lane;
    }
    const pick = best?.items[0] ?? top;
    return runnerUp && before(runnerUp, pick) ? top : pick;
  }

  add(item: Queued): void {
    const list = this.classes[item.job.priority];
    list.splice(insertionPoint(list, item), 0, item);
    if (!this.fairShare) return;
    const lanes = this.lanes[item.job.priority];
    let lane = lanes.get(item.job.deviceId);
    if (!lane) {
      let least: number | undefined;
      for (const other of lanes.values()) least = least === undefined ? other.counter : Math.min(least, other.counter);
      lanes.set(item.job.deviceId, (lane = { counter: least ?? 0, items: [] }));
    }
    // Lanes hold a device's jobs of one class: short, and mostly appended to.
    let at = lane.items.length;
    while (at > 0 && before(item, lane.items[at - 1] as Queued)) at -= 1;
    lane.items.splice(at, 0, item);
  }

  remove(item: Queued): void {
    const list = this.classes[item.job.priority];
    const found = insertionPoint(list, item) - 1;
    const at = list[found] === item ? found : list.indexOf(item);
    if (at >= 0) list.splice(at, 1);
    const lanes = this.lanes[item.job.priority];
    const lane = lanes.get(item.job.deviceId);
    if (!lane) return;
    const i = lane.items.indexOf(item);
    if (i >= 0) lane.items.splice(i, 1);
    if (lane.items.length === 0) lanes.delete(item.job.deviceId);
  }

  /** Takes out a job that `matches`, if one waits. */
  take(matches: (item: Queued) => boolean): Queued | undefined {
    const item = this.values().find(matches);
    if (item) this.remove(item);
    return item;
  }

  /** Adds to the counter of a device waiting in the class (a claim's charge, a correction); nothing once it stopped waiting. */
  charge(priority: Priority, deviceId: string, amount: number): void {
    const lane = this.lanes[priority].get(deviceId);
    if (lane) lane.counter += amount;
  }

  /** Every waiting job, the next first; the queue is empty after. */
  takeAll(): Queued[] {
    const all = PRIORITIES.flatMap((p) => this.classes[p].splice(0)).sort((a, b) => (before(a, b) ? -1 : 1));
    for (const lanes of Object.values(this.lanes)) lanes.clear();
    return all;
  }
}

/** Where `item` goes in a list sorted with the next last: after every job that runs after it. */
function insertionPoint(items: Queued[], item: Queued): number {
  let lo = 0;
  let hi = items.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (before(items[mid] as Queued, item)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}
