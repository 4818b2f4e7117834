// In-process coordination for a single instance (no REDIS_URL). Every method does its
// whole step synchronously, so each step is atomic just as a Lua script is in Redis.
import { PRIORITIES, type Reply } from '../../contract/index.js';
import type { BudgetCharge } from '../config/budgets.js';
import { MemorySpend, settlementOf, type BudgetPeriod, type BudgetUse } from './budget-spend.js';
import { ReadyQueue, type Queued } from './memory-queue.js';
import { SlidingWindow } from './sliding-window.js';
import { DeviceQuota, QueueBytes } from './memory-limits.js';
import { MemoryAnswers } from './memory-answers.js';
import { DeadlineIndex, takeDue } from './memory-deadlines.js';
import type {
  CachedAnswer,
  CompleteOptions,
  FlightClaim,
  Lead,
  UsageRecord,
  UsageReport,
  AdmitLimits,
  AdmitResult,
  ClaimedJob,
  ClaimOptions,
  ClaimResult,
  DeadLetterBounds,
  ExpiredJob,
  Job,
  QueueDepth,
  QuotaCharge,
  RateTake,
  RecordResult,
  Store,
} from './types.js';
import { withoutImageBytes } from './types.js';
import { DEFAULT_DEAD_LETTER_BOUNDS } from './dead-letters.js';
import { MemoryDeadLetters } from './memory-dead-letters.js';

const MINUTE_MS = 60_000;
const SWEEP_EVERY = 4096;

/** `recorded`: the reply recordReply kept while the job is still pending (not yet completed). */
type Record_ = { state: 'pending'; recorded?: Reply } | { state: 'done'; reply: Reply; expiresAt: number };

/**
 * What a repeat of a known request gets: the stored reply once answered, and also once its
 * holder recorded it (record, publish, complete: it is being published), else nothing yet.
 */
function repeatOf(record: Record_ | undefined, now: number): AdmitResult | undefined {
  if (record?.state === 'pending') return record.recorded ? { kind: 'duplicate_done', reply: record.recorded } : { kind: 'duplicate_pending' };
  if (record?.state === 'done' && record.expiresAt > now) return { kind: 'duplicate_done', reply: record.reply };
  return undefined;
}

/** A job as data again (what a queue holds), without what a claim added to it. */
function plainJob(held: Job & { owner?: string; fence?: number | undefined; callId?: string; recordedReply?: Reply }): Job {
  const { owner: _owner, fence: _fence, callId: _callId, recordedReply: _recorded, ...job } = held;
  return job;
}

interface Lease {
  job: ClaimedJob;
  expiresAt: number;
}

interface LockHolder {
  jobKey: string;
  expiresAt: number;
}

export class MemoryStore implements Store {
  readonly durable = false;

  private readonly queue: ReadyQueue;
  private readonly spend = new MemorySpend();
  private seq = 0;
  private readonly records = new Map<string, Record_>();
  private readonly quota = new DeviceQuota();
  private readonly bytes = new QueueBytes();
  private readonly calls = new SlidingWindow(MINUTE_MS);
  private readonly leases = new Map<string, Lease>();
  private readonly locks = new Map<string, LockHolder>();
  /** The last fencing number granted: one counter for every lock (as in Redis), so no lock name is kept. */
  private lastFence = 0;
  /** Jobs waiting for a held lock, in the order they were due. */
  private readonly parked = new Map<string, Queued[]>();
  readonly deadLetters: MemoryDeadLetters;
  private pausedUntil = 0;
  private readonly answers = new MemoryAnswers();
  private readonly deadlines = new DeadlineIndex();
  private admissions = 0;

  /**
   * `fairShare` (FAIR_SHARE, default true): fair share within a priority class (memory-queue.ts);
   * `deadLetters`: DLQ_MAX, DLQ_MAX_BYTES and DLQ_TTL_S.
   */
  constructor({ fairShare = true, deadLetters = DEFAULT_DEAD_LETTER_BOUNDS }: { fairShare?: boolean; deadLetters?: DeadLetterBounds } = {}) {
    this.queue = new ReadyQueue(fairShare);
    this.deadLetters = new MemoryDeadLetters(deadLetters, (job) => {
      this.records.set(job.key, { state: 'pending' });
      this.enqueue({ job, seq: this.seq++ });
    });
  }

  async admit(job: Job, limits: AdmitLimits, now: number, claim?: ClaimOptions): Promise<AdmitResult> {
    const quota = await this.chargeQuota(job.deviceId, limits.deviceRpm, now);
    if (!quota.ok) return { kind: 'rate_limited', retryAfterMs: quota.retryAfterMs };
    const repeat = repeatOf(this.records.get(job.key), now);
    if (repeat) return repeat;
    const answer = job.cacheKey === undefined ? undefined : this.answers.cached(job.cacheKey, now);
    if (answer) return { kind: 'cached', answer };
    const size = this.bytes.fits(job, limits);
    if (this.queuedCount() >= limits.queueMax || size === undefined) return { kind: 'queue_full' };
    const refused = this.spend.reserve(job.budget ?? [], now);
    if (refused) return { kind: 'budget_exceeded', ...refused };

    this.bytes.add(job.key, size);
    this.records.set(job.key, { state: 'pending' });
    this.enqueue({ job, seq: this.seq++ });
    if (!claim) return { kind: 'queued' };
    const claimed = this.claimNow(claim, now);
    const { cacheKey } = job;
    const taken = claimed.jobs.some((j) => j.key === job.key);
    const lead = taken && cacheKey !== undefined ? this.answers.lead(cacheKey, job.key, claim.leaseMs, now) : undefined;
    return { kind: 'queued', along: { claim: claimed, lead } };
  }

  async chargeQuota(deviceId: string, rpm: number, now: number): Promise<QuotaCharge> {
    if (++this.admissions % SWEEP_EVERY === 0) this.sweep(now);
    return this.quota.charge(deviceId, rpm, now);
  }

  async claim(options: ClaimOptions, now: number): Promise<ClaimResult> {
    return this.claimNow(options, now);
  }

  private claimNow(options: ClaimOptions, now: number): ClaimResult {
    const jobs: ClaimedJob[] = [];
    // Every waiting job whose deadline passed goes, wherever it waits and even while paused.
    const expired = this.deadlines
      .due(now, 1000)
      .flatMap((key) => takeDue(this.queue, this.parked, key, now) ?? [])
      .map(({ job }) => this.asExpired(job));
    let retryAtMs: number | undefined;
    if (this.pausedUntil > now) return { jobs, expired, retryAtMs: this.pausedUntil };

    while (jobs.length < options.max) {
      const next = this.queue.next();
      if (!next) break;
      const { job } = next;
      if (job.deadlineMs !== undefined && job.deadlineMs <= now) {
        this.queue.remove(next);
        expired.push(this.asExpired(job));
        continue;
      }
      const lock = job.request.lock;
      if (lock !== undefined && this.lockExpired(lock, now)) {
        // Freeing it moves the job parked behind it back into the queue, possibly ahead of
        // `next`: look at the queue again rather than pop what may no longer be `next`.
        this.unlock(lock);
        continue;
      }
      if (lock !== undefined && this.locks.has(lock)) {
        this.queue.remove(next);
        this.park(lock, next);
        continue;
      }
      const take = this.tryTake(job.tokenEstimate, options.rpm, options.tpm, now);
      if (!take.ok) {
        retryAtMs = take.retryAtMs;
        break;
      }
      this.queue.remove(next);
      this.queue.charge(job.priority, job.deviceId, job.fairCost ?? 0);
      let fence: number | undefined;
      if (lock !== undefined) {
        fence = ++this.lastFence;
        this.locks.set(lock, { jobKey: job.key, expiresAt: now + options.leaseMs });
      }
      const claimed: ClaimedJob = { ...job, owner: options.owner, fence, callId: take.callId };
      const recordedReply = this.recorded(job.key);
      if (recordedReply) claimed.recordedReply = recordedReply;
      this.leases.set(job.key, { job: claimed, expiresAt: now + options.leaseMs });
      jobs.push(claimed);
    }
    return { jobs, expired, retryAtMs };
  }

  async takeRate(tokens: number, rpm: number, tpm: number | undefined, now: number): Promise<RateTake> {
    if (this.pausedUntil > now) return { ok: false, retryAtMs: this.pausedUntil };
    return this.tryTake(tokens, rpm, tpm, now);
  }

  async settleTokens(callId: string, tokens: number): Promise<void> {
    this.calls.setWeight(Number(callId), tokens);
  }

  async pauseUpstream(untilMs: number): Promise<void> {
    this.pausedUntil = Math.max(this.pausedUntil, untilMs);
  }

  async renew(owner: string, keys: string[], leaseMs: number, now: number): Promise<boolean[]> {
    return keys.map((key) => {
      const lease = this.leases.get(key);
      if (!lease || lease.job.owner !== owner || lease.expiresAt <= now) return false;
      lease.expiresAt = now + leaseMs;
      const lock = lease.job.request.lock;
      const holder = lock === undefined ? undefined : this.locks.get(lock);
      if (holder?.jobKey === key) holder.expiresAt = now + leaseMs;
      return true;
    });
  }

  async recordReply(job: Job, reply: Reply, owner: string): Promise<RecordResult> {
    const lease = this.leases.get(job.key);
    if (!lease || lease.job.owner !== owner) return { kind: 'lost' };
    const record = this.records.get(job.key);
    if (record?.state === 'done') return { kind: 'kept', reply: record.reply };
    if (record?.recorded) return { kind: 'kept', reply: record.recorded };
    this.records.set(job.key, { state: 'pending', recorded: reply });
    return { kind: 'recorded' };
  }

  async complete(job: Job, reply: Reply, options: CompleteOptions, now: number): Promise<void> {
    // By the job's first answer only: a stale holder's answer may have come first.
    if (job.budget?.length && this.records.get(job.key)?.state !== 'done') this.spend.settle(settlementOf(job.budget, options.spent ?? options.usage));
    this.records.set(job.key, { state: 'done', reply, expiresAt: now + options.ttlS * 1000 });
    this.bytes.forget(job.key);
    this.dropLease(job.key);
    // As data: a replayed dead letter must not carry the recorded reply of its first life.
    if (options.deadLetter) this.deadLetters.add({ job: withoutImageBytes(plainJob(job)), reply, atMs: now }, now);
    if (options.cache) await this.cacheSet(options.cache.key, options.cache.answer, options.cache.ttlMs, now);
    if (options.unlead !== undefined) await this.unlead(options.unlead, job.key);
    if (options.usage) await this.recordUsage(options.usage, now);
  }

  async release(jobs: ClaimedJob[], _now: number): Promise<void> {
    for (const held of jobs) {
      if (!this.leases.has(held.key)) continue;
      this.dropLease(held.key);
      this.enqueue({ job: plainJob(held), seq: this.seq++ });
    }
  }

  async reap(maxAttempts: number, now: number): Promise<Job[]> {
    const exhausted: Job[] = [];
    for (const [key, lease] of this.leases) {
      if (lease.expiresAt > now) continue;
      this.dropLease(key);
      const held = plainJob(lease.job);
      const job = { ...held, attempts: held.attempts + 1 };
      // A recorded reply is the job's answer already: requeued, its next claim publishes it.
      if (job.attempts >= maxAttempts && this.recorded(key) === undefined) exhausted.push(this.handedOut(job));
      else this.enqueue({ job, seq: this.seq++ });
    }
    return exhausted;
  }

  async drain(): Promise<Job[]> {
    const all = [...this.queue.takeAll(), ...[...this.parked.values()].flat()].map((q) => q.job);
    this.parked.clear();
    for (const job of all) this.records.delete(this.handedOut(job).key);
    return all;
  }

  async storedReply(key: string, now: number): Promise<Reply | undefined> {
    const record = this.records.get(key);
    return record?.state === 'done' && record.expiresAt > now ? record.reply : undefined;
  }

  async queueBytes(): Promise<number> {
    return this.bytes.bytes;
  }

  async queueDepth(): Promise<QueueDepth> {
    const depth = Object.fromEntries(PRIORITIES.map((p) => [p, 0])) as QueueDepth;
    for (const q of this.queue.values()) depth[q.job.priority] += 1;
    for (const list of this.parked.values()) for (const q of list) depth[q.job.priority] += 1;
    return depth;
  }

  async settleBudgets(settled: Array<{ charge: BudgetCharge; used: number }>): Promise<void> {
    this.spend.settle(settled);
  }

  async budgetUse(periods: BudgetPeriod[]): Promise<BudgetUse[]> {
    return this.spend.use(periods);
  }

  async admitAnswered(job: Job, reply: Reply, ttlS: number, now: number): Promise<AdmitResult> {
    const repeat = repeatOf(this.records.get(job.key), now);
    if (repeat) return repeat;
    this.records.set(job.key, { state: 'done', reply, expiresAt: now + ttlS * 1000 });
    return { kind: 'answered' };
  }

  async cacheGet(cacheKey: string, now: number): Promise<CachedAnswer | undefined> {
    return this.answers.cached(cacheKey, now);
  }

  async cacheSet(cacheKey: string, answer: CachedAnswer, ttlMs: number, now: number): Promise<void> {
    this.answers.cacheSet(cacheKey, answer, ttlMs, now);
  }

  async lead(flights: FlightClaim[], leaseMs: number, now: number): Promise<Lead[]> {
    return flights.map(({ cacheKey, jobKey }) => this.answers.lead(cacheKey, jobKey, leaseMs, now));
  }

  async unlead(cacheKey: string, jobKey: string): Promise<void> {
    this.answers.unlead(cacheKey, jobKey);
  }

  async recordUsage(record: UsageRecord, now: number): Promise<void> {
    this.answers.recordUsage(record, now);
    if (record.fairDelta) this.queue.charge(record.priority, record.deviceId, record.fairDelta);
  }

  async usage(fromMs: number, toMs: number): Promise<UsageReport> {
    return this.answers.usage(fromMs, toMs);
  }

  async close(): Promise<void> {}

  private recorded(key: string): Reply | undefined {
    const record = this.records.get(key);
    return record?.state === 'pending' ? record.recorded : undefined;
  }

  /** A job handed out without a lease (expired, out of attempts, drained) stops counting toward QUEUE_MAX_BYTES, as in Redis. */
  private handedOut<T extends Job>(job: T): T {
    this.bytes.forget(job.key);
    return job;
  }

  private asExpired(job: Job): ExpiredJob {
    this.handedOut(job);
    const recordedReply = this.recorded(job.key);
    return recordedReply ? { ...job, recordedReply } : job;
  }

  private queuedCount(): number {
    let n = this.queue.length;
    for (const list of this.parked.values()) n += list.length;
    return n;
  }

  private enqueue(item: Queued): void {
    if (item.job.deadlineMs !== undefined) this.deadlines.add(item.job.key, item.job.deadlineMs);
    this.queue.add(item);
  }

  private park(lock: string, item: Queued): void {
    const list = this.parked.get(lock);
    if (list) list.push(item);
    else this.parked.set(lock, [item]);
  }

  /** A holder whose lease ran out (not yet reaped) no longer holds the lock. */
  private lockExpired(lock: string, now: number): boolean {
    const holder = this.locks.get(lock);
    return holder !== undefined && holder.expiresAt <= now;
  }

  /** Frees the lock and moves the next job parked behind it back to the queue. */
  private unlock(lock: string): void {
    this.locks.delete(lock);
    const list = this.parked.get(lock);
    const next = list?.shift();
    if (next) this.enqueue(next);
    if (list && list.length === 0) this.parked.delete(lock);
  }

  private dropLease(key: string): void {
    const lease = this.leases.get(key);
    this.leases.delete(key);
    const lock = lease?.job.request.lock;
    if (lock !== undefined && this.locks.get(lock)?.jobKey === key) this.unlock(lock);
  }

  private tryTake(tokens: number, rpm: number, tpm: number | undefined, now: number): RateTake {
    const rpmFree = this.calls.count(now) < rpm;
    const tpmFree = tpm === undefined || this.calls.weight(now) + tokens <= tpm || this.calls.count(now) === 0;
    if (rpmFree && tpmFree) {
      return { ok: true, callId: String(this.calls.add(now, tokens)) };
    }
    const rpmAt = rpmFree ? now : this.calls.freeAt(rpm, now);
    const tpmAt = tpmFree || tpm === undefined ? now : this.calls.weightFreeAt(tpm - tokens, now);
    return { ok: false, retryAtMs: Math.max(rpmAt, tpmAt) };
  }

  /** Forgets idle devices' windows and expired replies, so a long run does not grow without bound. */
  private sweep(now: number): void {
    this.quota.sweep(now);
    for (const [key, record] of this.records) if (record.state === 'done' && record.expiresAt <= now) this.records.delete(key);
    this.answers.sweep(now);
  }
}
