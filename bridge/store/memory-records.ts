// The memory store's idempotency records: each request's state (pending, with the reply its
// holder recorded; or done, with its reply until IDEMPOTENCY_TTL_S), and the role built on
// them with the answer cache (Answers in port.ts).
import type { Reply } from '../../contract/index.js';
import type { Job } from '../model/job.js';
import type { AnswerCache } from './memory-answers.js';
import type { ReadyQueue } from './memory-queue.js';
import type { AdmitResult, Answers, CachedAnswer, FlightClaim, Lead, UsageRecord } from './port.js';

/** `recorded`: the reply recordReply kept while the job is still pending (not yet completed). */
export type Record_ = { state: 'pending'; recorded?: Reply } | { state: 'done'; reply: Reply; expiresAt: number };

export class Records extends Map<string, Record_> {
  /**
   * What a repeat of a known request gets: the stored reply once answered, and also once its
   * holder recorded it (record, publish, complete: it is being published), else nothing yet.
   */
  repeatOf(key: string, now: number): AdmitResult | undefined {
    const record = this.get(key);
    if (record?.state === 'pending') return record.recorded ? { kind: 'duplicate_done', reply: record.recorded } : { kind: 'duplicate_pending' };
    if (record?.state === 'done' && record.expiresAt > now) return { kind: 'duplicate_done', reply: record.reply };
    return undefined;
  }

  /** The reply recorded for a job still pending. */
  recorded(key: string): Reply | undefined {
    const record = this.get(key);
    return record?.state === 'pending' ? record.recorded : undefined;
  }

  sweep(now: number): void {
    for (const [key, record] of this) if (record.state === 'done' && record.expiresAt <= now) this.delete(key);
  }
}

export class MemoryAnswers implements Answers {
  constructor(
    private readonly records: Records,
    private readonly cache: AnswerCache,
    private readonly ready: ReadyQueue,
  ) {}

  async admitAnswered(job: Job, reply: Reply, ttlS: number, now: number): Promise<AdmitResult> {
    const repeat = this.records.repeatOf(job.key, now);
    if (repeat) return repeat;
    this.records.set(job.key, { state: 'done', reply, expiresAt: now + ttlS * 1000 });
    return { kind: 'answered' };
  }

  async storedReply(key: string, now: number): Promise<Reply | undefined> {
    const record = this.records.get(key);
    return record?.state === 'done' && record.expiresAt > now ? record.reply : undefined;
  }

  async cacheGet(cacheKey: string, now: number): Promise<CachedAnswer | undefined> {
    return this.cache.cached(cacheKey, now);
  }

  async cacheSet(cacheKey: string, answer: CachedAnswer, ttlMs: number, now: number): Promise<void> {
    this.cache.cacheSet(cacheKey, answer, ttlMs, now);
  }

  async lead(flights: FlightClaim[], leaseMs: number, now: number): Promise<Lead[]> {
    return flights.map(({ cacheKey, jobKey }) => this.cache.lead(cacheKey, jobKey, leaseMs, now));
  }

  async unlead(cacheKey: string, jobKey: string): Promise<void> {
    this.cache.unlead(cacheKey, jobKey);
  }

  async recordUsage(record: UsageRecord, now: number): Promise<void> {
    this.cache.recordUsage(record, now);
    if (record.fairDelta) this.ready.charge(record.priority, record.deviceId, record.fairDelta);
  }
}
