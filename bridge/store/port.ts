// The coordination interface, cut by role (queue and leases; limits and budgets; answers and
// cache; operations). `memory` serves one instance; `redis` serves a fleet of instances sharing
// one queue. The stages only ever see these roles, and one contract suite (test/store/) runs
// against every implementation.
import type { BudgetCharge } from '../model/budget-charge.js';
import type { ClaimedJob, ExpiredJob, Job } from '../model/job.js';
import type { BudgetPeriod, BudgetUse } from './budget-spend.js';
import type { Answer, Priority, Reply } from '../../contract/index.js';
import type { UsageRecord, UsageReport } from './usage-types.js';

export type { UsageRecord, UsageReport, UsageTotals } from './usage-types.js';
export { HOUR_MS } from './usage-types.js';

/** What recordReply did. */
export type RecordResult =
  /** The reply is now the job's recorded reply: publish it. */
  | { kind: 'recorded' }
  /**
   * An earlier execution under the same owner (a lease that ran out and was claimed again by
   * the same instance) recorded one first: that one stands, publish it instead.
   */
  | { kind: 'kept'; reply: Reply }
  /** `owner` no longer holds the lease: publish nothing, whoever holds it now answers. */
  | { kind: 'lost' };

export interface AdmitLimits {
  deviceRpm: number;
  queueMax: number;
  /** QUEUE_MAX_BYTES over the stored size of every job admitted and not yet answered; none: unbounded. */
  queueMaxBytes?: number;
  /** How long a raw image is kept (IDEMPOTENCY_TTL_S); default: a day. */
  imageTtlMs?: number;
}

/** What counting one publish against its device's quota said. */
export type QuotaCharge = { ok: true } | { ok: false; retryAfterMs: number };

/** What an admission that carried a claim brings back. */
export interface ClaimAlong {
  claim: ClaimResult;
  /**
   * The admitted job's first coalescing step, when the claim took it and it may share its
   * call (no cached answer exists then: admission looked); undefined otherwise.
   */
  lead: Lead | undefined;
}

export type AdmitResult =
  /** `along`: present when admit was asked to claim. */
  | { kind: 'queued'; along?: ClaimAlong }
  /** Same (deviceId, id) queued or in flight: the one reply at its end answers both. */
  | { kind: 'duplicate_pending' }
  /** Same (deviceId, id) already answered: publish this stored reply again. */
  | { kind: 'duplicate_done'; reply: Reply }
  | { kind: 'rate_limited'; retryAfterMs: number }
  | { kind: 'queue_full' }
  /**
   * admit only: `charge` (one of job.budget) has no room for the job's estimate; `inFlight`
   * when it would have but for other requests' reservations. Nothing was reserved.
   */
  | { kind: 'budget_exceeded'; charge: BudgetCharge; inFlight: boolean }
  /**
   * admit only, for a job with a cacheKey: the cache holds a fresh answer. Nothing was
   * recorded; answer the request with it through admitAnswered.
   */
  | { kind: 'cached'; answer: CachedAnswer }
  /** admitAnswered only: the reply was recorded; publish it. */
  | { kind: 'answered' };

/** What the response cache keeps of a successful answer (the rest is per request). */
export type CachedAnswer = Answer;

export type Lead = { answer: CachedAnswer } | { leader: string };

/** One claimed job asking to lead the upstream call for its cache key. */
export interface FlightClaim {
  cacheKey: string;
  jobKey: string;
}

export interface CompleteOptions {
  ttlS: number;
  deadLetter: boolean;
  /** The upstream's answer, for identical requests (as cacheSet). */
  cache?: { key: string; answer: CachedAnswer; ttlMs: number };
  /** The cache key whose coalescing flight this job leads: ended (as unlead). */
  unlead?: string;
  /** The call's tokens and cost (as recordUsage). */
  usage?: UsageRecord;
  /**
   * What the request's budgets are settled with when it took more than one upstream call (a
   * typed answer asked again): every call's tokens and cost. Default: `usage`'s.
   */
  spent?: { promptTokens: number; completionTokens: number; costUsd: number };
}

export interface ClaimOptions {
  owner: string;
  max: number;
  leaseMs: number;
  rpm: number;
  tpm: number | undefined;
}

export interface ClaimResult {
  jobs: ClaimedJob[];
  /**
   * Jobs whose deadline passed while queued: out of the queue, to be answered `expired` (or
   * with their recorded reply, if they carry one) and completed.
   */
  expired: ExpiredJob[];
  /** When nothing could be claimed for lack of rate budget or an upstream pause: when to try again. */
  retryAtMs: number | undefined;
}

export type RateTake =
  | { ok: true; callId: string }
  /** `retryAtMs`: the earliest time a token may be free. */
  | { ok: false; retryAtMs: number };

export interface DeadLetter {
  job: Job;
  reply: Reply;
  atMs: number;
}

/** DLQ_MAX, DLQ_MAX_BYTES, DLQ_TTL_S: over either bound the oldest entries are dropped (counted); past the age they go. */
export interface DeadLetterBounds {
  max: number;
  maxBytes: number;
  ttlS: number;
}

export interface DeadLetterPage {
  /** Oldest first. */
  entries: DeadLetter[];
  /** Pass it as `after` for the next page; undefined when this page reached the end. */
  next: string | undefined;
}

/**
 * The dead-letter list, bounded in entries, bytes and age (DeadLetterBounds), and read a page or
 * an entry at a time: no reader ever holds the whole list. One entry per job key: a job
 * dead-lettered again replaces its earlier entry.
 */
export interface DeadLetters {
  /**
   * Up to `limit` entries (and about DEAD_LETTER_PAGE_BYTES of them, at least one) after the
   * cursor `after` (a `next` of an earlier page), oldest first, none past the age.
   */
  page(limit: number, after: string | undefined, now: number): Promise<DeadLetterPage>;
  /** One entry by its job key (`deviceId/id`), without reading the others. */
  get(key: string, now: number): Promise<DeadLetter | undefined>;
  /** How many entries are kept and their stored size in bytes; drops those past the age first. */
  stats(now: number): Promise<{ count: number; bytes: number }>;
  /**
   * Puts the entries of `keys` back in the queue as new arrivals: fresh attempts, no ttl,
   * placed by `now` + their class's offset, answered once more. The operator's call, so device
   * quotas and QUEUE_MAX do not apply. Returns how many.
   */
  replay(keys: string[], offsetsMs: Record<Priority, number>, now: number): Promise<number>;
  /** Replays every entry kept at `now`, a page at a time (one dead-lettered again meanwhile waits for the next replay). */
  replayAll(offsetsMs: Record<Priority, number>, now: number): Promise<number>;
  /** Empties the list; returns how many entries it held. */
  purge(): Promise<number>;
  /** Entries this process dropped to stay within DLQ_MAX and DLQ_MAX_BYTES, since it started. */
  dropped(): number;
}

export type QueueDepth = Record<Priority, number>;

/**
 * Queue and leases: a request from its admission (with everything that decides it, in one
 * atomic step) through claims, renewals and its recorded reply to its completion.
 */
export interface JobQueue {
  /**
   * Device quota + idempotency record + QUEUE_MAX (and QUEUE_MAX_BYTES) + the job's budget
   * reservations (job.budget, all or none) + enqueue, as one atomic step, in that order: the
   * quota counts every publish, a duplicate touches no budget. A job with a cacheKey whose
   * answer is cached gets `cached` instead (after the idempotency record, before QUEUE_MAX).
   * With `claim`, a queued job is followed by a claim as claim() would make it (the best jobs,
   * not necessarily this one) in the same step, and the admitted job's first lead() if the
   * claim took it: an idle instance answers a request with one store call less.
   */
  admit(job: Job, limits: AdmitLimits, now: number, claim?: ClaimOptions): Promise<AdmitResult>;

  /**
   * Best jobs by score whose lock is free, each taking one upstream rate token, leased to
   * `owner`. Jobs whose lock is held are parked until the holder finishes.
   */
  claim(options: ClaimOptions, now: number): Promise<ClaimResult>;

  /** Extends the leases (and their locks) still held by `owner`; false for each lost one. */
  renew(owner: string, keys: string[], leaseMs: number, now: number): Promise<boolean[]>;

  /**
   * Records the reply of a job `owner` holds, before it is published, so that whoever takes
   * the job over after a crash publishes this same reply rather than calling the upstream
   * again (a request gets one reply, possibly more than once, never two different ones).
   * Only while `owner` still holds the lease: a lease that ran out but was not yet reaped
   * still counts (nobody else can claim the job before a reap, and the reap keeps the reply).
   * Lease, lock, attempts and queue state are left as they are; the job stays pending for
   * admission (a duplicate is `duplicate_pending`). A recorded reply is never replaced: a
   * later claim hands it back (ClaimedJob.recordedReply, also on expired jobs), the reap
   * requeues the job instead of returning it as exhausted, and complete forgets it.
   */
  recordReply(job: Job, reply: Reply, owner: string): Promise<RecordResult>;

  /**
   * The job ended with `reply`: remember it for IDEMPOTENCY_TTL_S, release its lease and lock
   * if it holds them, and, when `deadLetter`, keep it on the dead-letter list (within its
   * bounds, dropping the oldest: DeadLetters). The answer's
   * bookkeeping (cache entry, end of its coalescing flight, usage) is done in the same step.
   */
  complete(job: Job, reply: Reply, options: CompleteOptions, now: number): Promise<void>;

  /** Hands held jobs back to the queue (shutdown); their attempts are unchanged. */
  release(jobs: ClaimedJob[], now: number): Promise<void>;

  /**
   * Expired leases back to the queue (attempts + 1) or, past maxAttempts, returned for a final
   * reply. A job with a recorded reply is always requeued: its next claim publishes that reply.
   */
  reap(maxAttempts: number, now: number): Promise<Job[]>;

  /** Removes and returns every queued job (memory store at shutdown: they cannot survive). */
  drain(): Promise<Job[]>;
}

/** Limits and budgets every instance shares: device quotas, the upstream's rate, budget reservations. */
export interface Limits {
  /**
   * Counts a publish refused before admission (invalid, too large) against its device's
   * quota, as admit counts every other one; over the quota, nothing is counted.
   */
  chargeQuota(deviceId: string, rpm: number, now: number): Promise<QuotaCharge>;

  /** One more upstream call's budget (a retry). */
  takeRate(tokens: number, rpm: number, tpm: number | undefined, now: number): Promise<RateTake>;

  /**
   * Replaces a call's token estimate with what the upstream reported using, so
   * RATE_LIMIT_TPM counts real tokens (a no-op once the call has left the window).
   */
  settleTokens(callId: string, tokens: number): Promise<void>;

  /** A 429 pauses dispatch to the upstream for every instance until `untilMs`. */
  pauseUpstream(untilMs: number): Promise<void>;

  /** Ends reservations (admit made them) with what each request really used (0 when it failed); complete() does it for its job. */
  settleBudgets(settled: Array<{ charge: BudgetCharge; used: number }>): Promise<void>;
}

/** Answers and cache: the reply each request got, the answers identical requests share, usage. */
export interface Answers {
  /**
   * After admit answered `cached` (and counted the publish against the quota): the
   * idempotency record checked again and the reply recorded as the answer (no queueing).
   */
  admitAnswered(job: Job, reply: Reply, ttlS: number, now: number): Promise<AdmitResult>;

  /** A finished job's reply, to answer a duplicate (also how tests read idempotency records). */
  storedReply(key: string, now: number): Promise<Reply | undefined>;

  /**
   * The cache entry itself. The request path reads it inside admit and writes it inside
   * complete; these are how tests read and write it.
   */
  cacheGet(cacheKey: string, now: number): Promise<CachedAnswer | undefined>;
  cacheSet(cacheKey: string, answer: CachedAnswer, ttlMs: number, now: number): Promise<void>;

  /**
   * Coalescing, one step for any number of jobs (a claim's worth): for each, the cached
   * answer if there is one by now; else makes its job the one calling the upstream for its
   * cacheKey unless another live job already is (for `leaseMs`), and names the leader.
   * Entries are handled in order, so of two identical ones the first leads.
   */
  lead(flights: FlightClaim[], leaseMs: number, now: number): Promise<Lead[]>;

  /** The leader is done (its answer, if any, is in the cache). */
  unlead(cacheKey: string, jobKey: string): Promise<void>;

  /** Adds one answered call to the hour's totals (kept about a week). */
  recordUsage(record: UsageRecord, now: number): Promise<void>;
}

/** What an operator reads and does: queue depth and bytes, dead letters, usage and budget reports. */
export interface Operations {
  queueDepth(): Promise<QueueDepth>;

  /** The stored size of every job admitted and not yet answered, as QUEUE_MAX_BYTES counts it. */
  queueBytes(): Promise<number>;

  /** Jobs completed with `deadLetter` (CompleteOptions), bounded and paged. */
  readonly deadLetters: DeadLetters;

  /** Totals of the hours from `fromMs` to `toMs`. */
  usage(fromMs: number, toMs: number): Promise<UsageReport>;

  /** What these budgets' periods have used and reserved, per subject. */
  budgetUse(periods: BudgetPeriod[]): Promise<BudgetUse[]>;
}

/**
 * The coordination interface, by role: each part of the bridge is handed the roles it uses.
 * `memory` serves one instance; `redis` a fleet sharing one queue.
 */
export interface Store {
  /** Whether queued jobs outlive this process (Redis) or die with it (memory). */
  readonly durable: boolean;
  readonly queue: JobQueue;
  readonly limits: Limits;
  readonly answers: Answers;
  readonly operations: Operations;
  close(): Promise<void>;
}
