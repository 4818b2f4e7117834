// The memory store's deadline index: queued jobs by deadline (a min-heap), so a claim
// finds every waiting job whose ttl_ms passed, not only the one at the head of the queue
// (the Redis store's deadlines sorted set). Entries of jobs that left the queue are dropped
// lazily, when they come up.
import { type Deadline, DeadlineHeap } from './deadline-heap.js';
import type { Job } from '../model/job.js';

/** Queued jobs by deadline; `due` takes out the keys whose deadline has come, earliest first. */
export class DeadlineIndex {
  private readonly heap = new DeadlineHeap();

  add(key: string, at: number): void {
    this.heap.push({ key, at });
  }

  /** Takes out up to `limit` keys whose deadline is at or before `now`, earliest first. */
  due(now: number, limit: number): string[] {
    const keys: string[] = [];
    while (keys.length < limit && (this.heap.peek()?.at ?? Infinity) <= now) keys.push((this.heap.pop() as Deadline).key);
    return keys;
  }
}

/** Takes the job `key` out of the queue or from behind its lock if it waits there and its deadline has come. */
export function takeDue<T extends { job: Job }>(
  queue: { take(matches: (q: T) => boolean): T | undefined },
  parked: Map<string, T[]>,
  key: string,
  now: number,
): T | undefined {
  // The key may be waiting again in a later life (a replayed dead letter) with another deadline.
  const due = (q: T) => q.job.key === key && q.job.deadlineMs !== undefined && q.job.deadlineMs <= now;
  const taken = queue.take(due);
  if (taken) return taken;
  for (const [lock, list] of parked) {
    const i = list.findIndex(due);
    if (i < 0) continue;
    const [item] = list.splice(i, 1);
    if (list.length === 0) parked.delete(lock);
    return item;
  }
  return undefined;
}
