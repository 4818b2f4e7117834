// A binary min-heap of deadlines: the memory store's queued jobs (memory-deadlines.ts) and the
// scheduler's deadline watch (recovery/deadlines.ts) both take the earliest first.
export interface Deadline {
  at: number;
  key: string;
}

export class DeadlineHeap {
  private readonly heap: Deadline[] = [];

  get size(): number {
    return this.heap.length;
  }

  peek(): Deadline | undefined {
    return this.heap[0];
  }

  push(entry: Deadline): void {
    const heap = this.heap;
    heap.push(entry);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if ((heap[parent] as Deadline).at <= entry.at) break;
      heap[i] = heap[parent] as Deadline;
      i = parent;
    }
    heap[i] = entry;
  }

  pop(): Deadline | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop() as Deadline;
    if (heap.length > 0) {
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        if (left >= heap.length) break;
        const right = left + 1;
        const child = right < heap.length && (heap[right] as Deadline).at < (heap[left] as Deadline).at ? right : left;
        if ((heap[child] as Deadline).at >= last.at) break;
        heap[i] = heap[child] as Deadline;
        i = child;
      }
      heap[i] = last;
    }
    return top;
  }
}
