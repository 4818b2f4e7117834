// The memory store's queue and leases: admission, claims (with locks and fencing), renewals,
// recorded replies and completion, each step done synchronously so it is atomic as a Lua
// function is in Redis.
import { PRIORITIES, type Reply } from '../../contract/index.js';
import { withoutImageBytes, type ClaimedJob, type ExpiredJob, type Job } from '../model/job.js';
import { settlementOf } from './budget-spend.js';
import { type ReadyQueue, type Queued } from './memory-queue.js';
import { QueueBytes, type MemoryLimits } from './memory-limits.js';
import type { AnswerCache } from './memory-answers.js';
import { DeadlineIndex, takeDue } from './memory-deadlines.js';
import { MemoryDeadLetters } from './memory-dead-letters.js';
import type { MemoryAnswers, Records } from './memory-records.js';
import type { AdmitLimits, AdmitResult, ClaimOptions, ClaimResult, CompleteOptions, DeadLetterBounds, JobQueue, QueueDepth, RecordResult } from './port.js';

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

/** The other roles' state a queue step reads and writes in the same step. */
export interface MemoryQueueParts {
  ready: ReadyQueue;
  records: Records;
  limits: MemoryLimits;
  cache: AnswerCache;
  answers: MemoryAnswers;
  deadLetterBounds: DeadLetterBounds;
}

export class MemoryJobQueue implements JobQueue {
  readonly deadLetters: MemoryDeadLetters;
  readonly bytes = new QueueBytes();
  private readonly ready: ReadyQueue;
  private readonly records: Records;
  private readonly limits: MemoryLimits;
  private readonly cache: AnswerCache;
  private readonly answers: MemoryAnswers;
  private seq = 0;
  private readonly leases = new Map<string, Lease>();
  private readonly locks = new Map<string, LockHolder>();
  /** The last fencing number granted: one counter for every lock (as in Redis), so no lock name is kept. */
  private lastFence = 0;
  /** Jobs waiting for a held lock, in the order they were due. */
  private readonly parked = new Map<string, Queued[]>();
  private readonly deadlines = new DeadlineIndex();

  constructor(parts: MemoryQueueParts) {
    ({ ready: this.ready, records: this.records, limits: this.limits, cache: this.cache, answers: this.answers } = parts);
    this.deadLetters = new MemoryDeadLetters(parts.deadLetterBounds, (job) => {
      this.records.set(job.key, { state: 'pending' });
      this.enqueue({ job, seq: this.seq++ });
    });
  }

  async admit(job: Job, limits: AdmitLimits, now: number, claim?: ClaimOptions): Promise<AdmitResult> {
    const quota = await this.limits.chargeQuota(job.deviceId, limits.deviceRpm, now);
    if (!quota.ok) return { kind: 'rate_limited', retryAfterMs: quota.retryAfterMs };
    const repeat = this.records.repeatOf(job.key, now);
    if (repeat) return repeat;
    const answer = job.cacheKey === undefined ? undefined : this.cache.cached(job.cacheKey, now);
    if (answer) return { kind: 'cached', answer };
    const size = this.bytes.fits(job, limits);
    if (this.queuedCount() >= limits.queueMax || size === undefined) return { kind: 'queue_full' };
    const refused = this.limits.spend.reserve(job.budget ?? [], now);
    if (refused) return { kind: 'budget_exceeded', ...refused };

    this.bytes.add(job.key, size);
    this.records.set(job.key, { state: 'pending' });
    this.enqueue({ job, seq: this.seq++ });
    if (!claim) return { kind: 'queued' };
    const claimed = this.claimNow(claim, now);
    const { cacheKey } = job;
    const taken = claimed.jobs.some((j) => j.key === job.key);
    const lead = taken && cacheKey !== undefined ? this.cache.lead(cacheKey, job.key, claim.leaseMs, now) : undefined;
    return { kind: 'queued', along: { claim: claimed, lead } };
  }

  async claim(options: ClaimOptions, now: number): Promise<ClaimResult> {
    return this.claimNow(options, now);
  }

  private claimNow(options: ClaimOptions, now: number): ClaimResult {
    const jobs: ClaimedJob[] = [];
    // Every waiting job whose deadline passed goes, wherever it waits and even while paused.
    const expired = this.deadlines
      .due(now, 1000)
      .flatMap((key) => takeDue(this.ready, this.parked, key, now) ?? [])
      .map(({ job }) => this.asExpired(job));
    let retryAtMs: number | undefined;
    if (this.limits.pausedUntil > now) return { jobs, expired, retryAtMs: this.limits.pausedUntil };

    while (jobs.length < options.max) {
      const next = this.ready.next();
      if (!next) break;
      const { job } = next;
      if (job.deadlineMs !== undefined && job.deadlineMs <= now) {
        this.ready.remove(next);
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
        this.ready.remove(next);
        this.park(lock, next);
        continue;
      }
      const take = this.limits.tryTake(job.tokenEstimate, options.rpm, options.tpm, now);
      if (!take.ok) {
        retryAtMs = take.retryAtMs;
        break;
      }
      jobs.push(this.lease(next, options, take.callId, now));
    }
    return { jobs, expired, retryAtMs };
  }

  /** Takes `next` out of the queue, leased to the claim's owner (with its lock, if it names one). */
  private lease(next: Queued, options: ClaimOptions, callId: string, now: number): ClaimedJob {
    const { job } = next;
    this.ready.remove(next);
    this.ready.charge(job.priority, job.deviceId, job.fairCost ?? 0);
    const lock = job.request.lock;
    let fence: number | undefined;
    if (lock !== undefined) {
      fence = ++this.lastFence;
      this.locks.set(lock, { jobKey: job.key, expiresAt: now + options.leaseMs });
    }
    const claimed: ClaimedJob = { ...job, owner: options.owner, fence, callId };
    const recordedReply = this.records.recorded(job.key);
    if (recordedReply) claimed.recordedReply = recordedReply;
    this.leases.set(job.key, { job: claimed, expiresAt: now + options.leaseMs });
    return claimed;
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
    if (job.budget?.length && this.records.get(job.key)?.state !== 'done') this.limits.spend.settle(settlementOf(job.budget, options.spent ?? options.usage));
    this.records.set(job.key, { state: 'done', reply, expiresAt: now + options.ttlS * 1000 });
    this.bytes.forget(job.key);
    this.dropLease(job.key);
    // As data: a replayed dead letter must not carry the recorded reply of its first life.
    if (options.deadLetter) this.deadLetters.add({ job: withoutImageBytes(plainJob(job)), reply, atMs: now }, now);
    if (options.cache) await this.answers.cacheSet(options.cache.key, options.cache.answer, options.cache.ttlMs, now);
    if (options.unlead !== undefined) await this.answers.unlead(options.unlead, job.key);
    if (options.usage) await this.answers.recordUsage(options.usage, now);
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
      if (job.attempts >= maxAttempts && this.records.recorded(key) === undefined) exhausted.push(this.handedOut(job));
      else this.enqueue({ job, seq: this.seq++ });
    }
    return exhausted;
  }

  async drain(): Promise<Job[]> {
    const all = [...this.ready.takeAll(), ...[...this.parked.values()].flat()].map((q) => q.job);
    this.parked.clear();
    for (const job of all) this.records.delete(this.handedOut(job).key);
    return all;
  }

  /** Queued jobs (waiting or parked behind a lock) per class. */
  depth(): QueueDepth {
    const depth = Object.fromEntries(PRIORITIES.map((p) => [p, 0])) as QueueDepth;
    for (const q of this.ready.values()) depth[q.job.priority] += 1;
    for (const list of this.parked.values()) for (const q of list) depth[q.job.priority] += 1;
    return depth;
  }

  /** A job handed out without a lease (expired, out of attempts, drained) stops counting toward QUEUE_MAX_BYTES, as in Redis. */
  private handedOut<T extends Job>(job: T): T {
    this.bytes.forget(job.key);
    return job;
  }

  private asExpired(job: Job): ExpiredJob {
    this.handedOut(job);
    const recordedReply = this.records.recorded(job.key);
    return recordedReply ? { ...job, recordedReply } : job;
  }

  private queuedCount(): number {
    let n = this.ready.length;
    for (const list of this.parked.values()) n += list.length;
    return n;
  }

  private enqueue(item: Queued): void {
    if (item.job.deadlineMs !== undefined) this.deadlines.add(item.job.key, item.job.deadlineMs);
    this.ready.add(item);
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
}
