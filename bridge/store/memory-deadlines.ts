// The memory store's deadline index: queued jobs by deadline (a binary min-heap), so a claim
// finds every waiting job whose ttl_ms passed, not only the one at the head of the queue
// (the Redis store's deadlines sorted set). Entries of jobs that left the queue are dropped
// lazily, when they come up.
import type { Job } from './types.js';

interface Entry {
  at: number;
  key: string;
}

export class DeadlineIndex {
  private readonly heap: Entry[] = [];

  add(key: string, at: number): void {
    const heap = this.heap;
    heap.push({ key, at });
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if ((heap[parent] as Entry).at <= at) break;
      [heap[parent], heap[i]] = [heap[i] as Entry, heap[parent] as Entry];
      i = parent;
    }
  }

  /** Takes out up to `limit` keys whose deadline is at or before `now`, earliest first. */
  due(now: number, limit: number): string[] {
    const keys: string[] = [];
    while (keys.length < limit && this.heap.length > 0 && (this.heap[0] as Entry).at <= now) keys.push(this.pop().key);
    return keys;
  }

  private pop(): Entry {
    const heap = this.heap;
    const top = heap[0] as Entry;
    const last = heap.pop() as Entry;
    if (heap.length === 0) return top;
    heap[0] = last;
    for (let i = 0; ; ) {
      const l = 2 * i + 1;
      const r = l + 1;
      let min = i;
      if (l < heap.length && (heap[l] as Entry).at < (heap[min] as Entry).at) min = l;
      if (r < heap.length && (heap[r] as Entry).at < (heap[min] as Entry).at) min = r;
      if (min === i) break;
      [heap[min], heap[i]] = [heap[i] as Entry, heap[min] as Entry];
      i = min;
    }
    return top;
  }
}

/** Takes the job `key` out of the queue or from behind its lock if it waits there and its deadline has come. */
export function takeDue<T extends { job: Job }>(queue: T[], parked: Map<string, T[]>, key: string, now: number): T | undefined {
  // The key may be waiting again in a later life (a replayed dead letter) with another deadline.
  const due = (q: T) => q.job.key === key && q.job.deadlineMs !== undefined && q.job.deadlineMs <= now;
  const at = queue.findIndex(due);
  if (at >= 0) return queue.splice(at, 1)[0];
  for (const [lock, list] of parked) {
    const i = list.findIndex(due);
    if (i < 0) continue;
    const [item] = list.splice(i, 1);
    if (list.length === 0) parked.delete(lock);
    return item;
  }
  return undefined;
}
