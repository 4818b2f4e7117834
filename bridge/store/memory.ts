// In-process coordination for a single instance (no REDIS_URL). Every step is done
// synchronously, so each is atomic just as a Lua function is in Redis. The store is its four
// roles (port.ts), each in its own file, over state they share the way Redis keys are shared.
import { AnswerCache } from './memory-answers.js';
import { MemoryJobQueue } from './memory-job-queue.js';
import { MemoryLimits } from './memory-limits.js';
import { ReadyQueue } from './memory-queue.js';
import { MemoryAnswers, Records } from './memory-records.js';
import { DEFAULT_DEAD_LETTER_BOUNDS } from './dead-letters.js';
import type { BudgetPeriod, BudgetUse } from './budget-spend.js';
import type { DeadLetterBounds, Operations, QueueDepth, Store, UsageReport } from './port.js';
import type { MemoryDeadLetters } from './memory-dead-letters.js';

export class MemoryStore implements Store {
  readonly durable = false;
  readonly queue: MemoryJobQueue;
  readonly limits: MemoryLimits;
  readonly answers: MemoryAnswers;
  readonly operations: MemoryOperations;

  /**
   * `fairShare` (FAIR_SHARE, default true): fair share within a priority class (memory-queue.ts);
   * `deadLetters`: DLQ_MAX, DLQ_MAX_BYTES and DLQ_TTL_S.
   */
  constructor({ fairShare = true, deadLetters = DEFAULT_DEAD_LETTER_BOUNDS }: { fairShare?: boolean; deadLetters?: DeadLetterBounds } = {}) {
    const ready = new ReadyQueue(fairShare);
    const records = new Records();
    const cache = new AnswerCache();
    // Expired replies and answers go with idle devices' windows.
    this.limits = new MemoryLimits((now) => {
      records.sweep(now);
      cache.sweep(now);
    });
    this.answers = new MemoryAnswers(records, cache, ready);
    this.queue = new MemoryJobQueue({ ready, records, limits: this.limits, cache, answers: this.answers, deadLetterBounds: deadLetters });
    this.operations = new MemoryOperations(this.queue, this.limits, cache);
  }

  async close(): Promise<void> {}
}

class MemoryOperations implements Operations {
  readonly deadLetters: MemoryDeadLetters;

  constructor(
    private readonly queue: MemoryJobQueue,
    private readonly limits: MemoryLimits,
    private readonly cache: AnswerCache,
  ) {
    this.deadLetters = queue.deadLetters;
  }

  async queueDepth(): Promise<QueueDepth> {
    return this.queue.depth();
  }

  async queueBytes(): Promise<number> {
    return this.queue.bytes.bytes;
  }

  async usage(fromMs: number, toMs: number): Promise<UsageReport> {
    return this.cache.usage(fromMs, toMs);
  }

  async budgetUse(periods: BudgetPeriod[]): Promise<BudgetUse[]> {
    return this.limits.spend.use(periods);
  }
}
