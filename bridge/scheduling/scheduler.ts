// The claim loop: keeps up to MAX_CONCURRENCY jobs in flight, renews their leases while
// upstream calls run, and turns every ending (answer, failure, expiry) into one reply.
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../config/config.js';
import { BridgeError, isEmbeddingRequest, LeaseLost, type Reply, toBridgeError } from '../../contract/index.js';
import { Completion, pricedUsage, STORE_RETRY_MS, type Bookkeeping } from '../results/completion.js';
import { errorReply } from '../results/replies.js';
import { lazyChild, type LazyLog, type Logger } from '../logger.js';
import type { Results } from '../results/results.js';
import type { Price } from '../config/config-file.js';
import { answerFields, okReply } from '../results/replies.js';
import type { CachedAnswer, ClaimAlong, ClaimedJob, ClaimOptions, ClaimResult, ExpiredJob, FlightClaim, Job, Lead, Store } from '../store/types.js';
import { buildUpstreamBody } from '../upstream/body.js';
import type { UpstreamCall, UpstreamResult } from '../upstream/client.js';

export type SchedulerConfig = Pick<
  Config,
  | 'maxConcurrency'
  | 'upstreamTimeoutMs'
  | 'rateLimitRpm'
  | 'rateLimitTpm'
  | 'maxAttempts'
  | 'idempotencyTtlS'
  | 'upstreamModel'
  | 'cacheTtlS'
> & {
  /** Model → price per million tokens (CONFIG_FILE `prices`), for the usage's cost. */
  prices: Record<string, Price>;
  /** CONFIG_FILE `embeddingModel`: the model of embeddings requests that name none (never UPSTREAM_MODEL). */
  embeddingModel: string;
};

/** What the scheduler reports for metrics (bridge/ops/metrics.ts); every method must be cheap. */
export interface SchedulerObserver {
  /** A job was claimed (holding its lock, if it names one) at `claimedAt`. */
  claimed(priority: Job['priority'], arrivalMs: number, locked: boolean, claimedAt: number): void;
  /** An upstream call answered. */
  answered(result: UpstreamResult): void;
  /** A job was answered by an identical one in flight. */
  coalescedAnswer(): void;
  /** A retry had to wait for rate budget. */
  rateLimitWait(): void;
  /** Usage as recorded in the store. */
  usage(model: string, promptTokens: number, completionTokens: number, costUsd: number): void;
}

/** What the queue-wait overload guard learns from the claims (bridge/intake/overload.ts). */
export interface QueueWaitSink {
  claimed(priority: Job['priority'], waitMs: number, locked: boolean): void;
  /** A claim or a retry was held back by the upstream rate budget or a 429 pause. */
  claimHeld(): void;
  /** A claim took less than it asked for: nothing was waiting. */
  queueDrained(): void;
}

const NO_QUEUE_WAIT: QueueWaitSink = { claimed: () => undefined, claimHeld: () => undefined, queueDrained: () => undefined };

/** The weight of the latest job in meanHoldMs: about the last 20 jobs count. */
const HOLD_SMOOTHING = 0.05;

const NO_OBSERVER: SchedulerObserver = {
  claimed: () => undefined,
  answered: () => undefined,
  coalescedAnswer: () => undefined,
  rateLimitWait: () => undefined,
  usage: () => undefined,
};

export interface Upstream {
  call(call: UpstreamCall): Promise<UpstreamResult>;
}

/**
 * Most free slots one admission reserves for the claim it carries: enough to take a burst
 * in one step, while other admissions in flight at the same moment can still carry theirs.
 */
const CLAIM_ALONG_MAX = 16;
/** Idle poll: other instances (Redis) admit jobs this one is not told about. */
const IDLE_POLL_MS = 100;
const REAP_EVERY_MS = 2000;
/** How often a request waiting on an identical one in flight looks for its answer. */
const FOLLOW_POLL_MS = 25;
/** A lease outlives one attempt by this much (CONTRACT guarantee 1: takeover within timeout + 5 s). */
const LEASE_MARGIN_MS = 5000;

function nth(leads: Lead[], index: number): Lead {
  const lead = leads[index];
  if (!lead) throw new BridgeError('internal', 'the store answered fewer coalescing steps than it was asked');
  return lead;
}

interface Running {
  job: ClaimedJob;
  /** The rate-window entry of the latest upstream call, settled with the reported usage. */
  callId: string;
  abort: AbortController;
  /** Monotonic time until which our lease surely holds. */
  leaseUntil: number;
  leaseLost: boolean;
  done: Promise<void>;
}

export class Scheduler {
  private readonly running = new Map<string, Running>();
  private readonly leaseMs: number;
  private stopping = false;
  /** Aborted once stop() is done: ends completion retries that nothing else would end. */
  private readonly stopped = new AbortController();
  private pumping = false;
  private pumpAgain = false;
  /** Slots reserved by admissions carrying a claim (claimAlong → adopt). */
  private reserved = 0;
  /** A pump found every free slot reserved: pump again when the reservation ends. */
  private deferred = false;
  /**
   * Whether the queue may hold work waiting for one of our slots: set when a claim was cut
   * short by our capacity or an admission found no free slot, cleared by a claim that took
   * less than it could.
   */
  private backlog = true;
  private wakeTimer: NodeJS.Timeout | undefined;
  private wakeAt = 0;
  private renewTimer: NodeJS.Timeout | undefined;
  private reapTimer: NodeJS.Timeout | undefined;
  /** Read once: per-request debug lines are skipped without building their logger. */
  private readonly debugLines: boolean;
  private holdMs: number | undefined;
  /** Record, publish, complete: how every ending becomes the job's one reply. */
  private readonly completion: Completion;

  constructor(
    private readonly config: SchedulerConfig,
    private readonly store: Store,
    private readonly upstream: Upstream,
    private readonly results: Results,
    private readonly logger: Logger,
    private readonly owner: string,
    private readonly clock: () => number = Date.now,
    private readonly observer: SchedulerObserver = NO_OBSERVER,
    private readonly queueWait: QueueWaitSink = NO_QUEUE_WAIT,
  ) {
    this.leaseMs = config.upstreamTimeoutMs + LEASE_MARGIN_MS;
    this.debugLines = logger.isLevelEnabled('debug');
    this.completion = new Completion(config, store, results, clock, (u) => observer.usage(u.model, u.promptTokens, u.completionTokens, u.costUsd));
  }

  private jobLog(job: Job): LazyLog {
    return lazyChild(this.logger, { reqId: job.id, deviceId: job.deviceId });
  }

  start(): void {
    // Renewing every second keeps "no attempt starts unless it ends inside the lease" cheap to satisfy.
    this.renewTimer = setInterval(() => void this.renew(), Math.min(1000, this.leaseMs / 4));
    this.reapTimer = setInterval(() => void this.reap(), REAP_EVERY_MS);
    this.wake();
  }

  get inFlight(): number {
    return this.running.size;
  }

  /** Something may be claimable now (a request was queued, a job finished). */
  wake(delayMs = 0): void {
    if (this.stopping) return;
    const at = Date.now() + Math.max(0, delayMs);
    // Keep an earlier pending wake: resetting it on every admission would starve the pump
    // whenever requests arrive faster than the timer fires.
    if (this.wakeTimer && this.wakeAt <= at) return;
    clearTimeout(this.wakeTimer);
    this.wakeAt = at;
    this.wakeTimer = setTimeout(() => {
      this.wakeTimer = undefined;
      void this.pump();
    }, at - Date.now());
  }

  /**
   * Stops claiming, lets in-flight calls finish within `graceMs`, then aborts the rest and
   * hands them back to the queue.
   */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    clearTimeout(this.wakeTimer);
    clearInterval(this.reapTimer);
    const all = Promise.allSettled([...this.running.values()].map((r) => r.done));
    const grace = sleep(graceMs, 'timeout' as const, { ref: false });
    if ((await Promise.race([all, grace])) === 'timeout') {
      const unfinished = [...this.running.values()];
      this.logger.warn({ count: unfinished.length }, 'shutdown grace over: handing unfinished requests back to the queue');
      for (const r of unfinished) r.abort.abort();
      await Promise.allSettled(unfinished.map((r) => r.done));
      try {
        await this.store.release(unfinished.map((r) => r.job), this.clock());
      } catch (err) {
        // Their leases run out instead, and another instance (or the next start) reaps them.
        this.logger.warn({ err }, 'could not hand unfinished requests back');
      }
    }
    clearInterval(this.renewTimer);
    this.stopped.abort();
  }

  /**
   * Claim options for an admission to carry (Store.admit), reserving up to CLAIM_ALONG_MAX
   * free slots until adopt(); undefined when there is no free slot (or we are stopping).
   */
  claimAlong(): ClaimOptions | undefined {
    if (this.stopping) return undefined;
    const free = this.freeSlots();
    if (free <= 0) {
      this.backlog = true; // this admission waits in the queue for a slot
      return undefined;
    }
    const options = this.claimOptions(Math.min(free, CLAIM_ALONG_MAX));
    this.reserved += options.max;
    return options;
  }

  /**
   * What an admission that carried `claim` brought back (undefined when it queued nothing or
   * failed); ends the reservation. `jobKey`: the admitted job, whose first lead it may carry.
   */
  adopt(claim: ClaimOptions, along: ClaimAlong | undefined, jobKey: string): void {
    this.reserved -= claim.max;
    if (along) {
      if (this.stopping) {
        // Too late to start them: back to the queue, as stop() does with unfinished jobs.
        for (const job of along.claim.expired) void this.expire(job);
        this.store.release(along.claim.jobs, this.clock()).catch((err: unknown) => {
          this.logger.warn({ err }, 'could not hand claimed requests back');
        });
      } else {
        const known = along.lead === undefined ? undefined : { key: jobKey, lead: along.lead };
        const retryAtMs = this.take(along.claim, claim.max, this.clock(), known);
        if (retryAtMs !== undefined) this.wake(retryAtMs - this.clock());
      }
    }
    if (this.deferred) {
      this.deferred = false;
      this.wake();
    }
  }

  private freeSlots(): number {
    return this.config.maxConcurrency - this.running.size - this.reserved;
  }

  private claimOptions(max: number): ClaimOptions {
    return { owner: this.owner, max, leaseMs: this.leaseMs, rpm: this.config.rateLimitRpm, tpm: this.config.rateLimitTpm };
  }

  private async pump(): Promise<void> {
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    let nextWake = IDLE_POLL_MS;
    try {
      do {
        this.pumpAgain = false;
        while (!this.stopping) {
          const max = this.freeSlots();
          if (max <= 0) {
            // Slots an admission reserved may come back unused: look again when they do.
            if (this.reserved > 0) this.deferred = true;
            break;
          }
          const now = this.clock();
          const claimed = await this.store.claim(this.claimOptions(max), now);
          const retryAtMs = this.take(claimed, max, now);
          if (retryAtMs !== undefined) {
            nextWake = Math.max(1, retryAtMs - now);
            break;
          }
          // Less than it could take: the queue had no more (expired jobs may have hidden some).
          if (claimed.jobs.length < max && claimed.expired.length === 0) break;
        }
      } while (this.pumpAgain);
    } catch (err) {
      this.logger.error({ err }, 'claim failed; retrying');
      nextWake = STORE_RETRY_MS;
    } finally {
      this.pumping = false;
    }
    if (this.freeSlots() > 0) this.wake(nextWake);
  }

  /**
   * Starts what a claim brought (the pump's or an admission's) and answers its expired jobs.
   * `known`: a job whose first lead came with it. Returns when to retry, if the claim was
   * stopped by the upstream rate budget or a pause.
   */
  private take(claimed: ClaimResult, asked: number, now: number, known?: { key: string; lead: Lead }): number | undefined {
    for (const job of claimed.expired) void this.expire(job);
    // Cut short by our capacity, it may have left work queued: finishing jobs look for it.
    this.backlog = claimed.jobs.length >= asked;
    const leads = this.leadAll(claimed.jobs, now, known);
    claimed.jobs.forEach((job, i) => this.run(job, now, leads[i]));
    if (claimed.retryAtMs !== undefined) this.queueWait.claimHeld();
    else if (!this.backlog && claimed.expired.length === 0) this.queueWait.queueDrained();
    return claimed.retryAtMs;
  }

  /**
   * The first coalescing step of every claimed job that may share its call, as one store
   * call for the whole claim rather than one per job. Undefined for a job that never shares.
   */
  private leadAll(jobs: ClaimedJob[], now: number, known?: { key: string; lead: Lead }): (Promise<Lead> | undefined)[] {
    const flights: FlightClaim[] = [];
    // A job with a recorded reply makes no call: it takes no flight.
    const shares = (job: ClaimedJob): boolean => job.cacheKey !== undefined && job.recordedReply === undefined;
    for (const job of jobs) {
      if (shares(job) && job.key !== known?.key) flights.push({ cacheKey: job.cacheKey as string, jobKey: job.key });
    }
    const batch = flights.length === 0 ? undefined : this.store.lead(flights, this.leaseMs, now);
    let index = 0;
    return jobs.map((job) => {
      if (!shares(job)) return undefined;
      if (known && job.key === known.key) return Promise.resolve(known.lead);
      const mine = index++;
      return batch?.then((leads) => nth(leads, mine));
    });
  }

  /**
   * Jobs `instances` schedulers like this one start per second with every slot busy: their
   * slots over how long a job holds one here (claim to reply, a moving average over the last
   * few dozen jobs). Undefined before the first job ended or without an instance count. The
   * queue-wait guard's capacity.
   */
  capacityPerS(instances: number | undefined): number | undefined {
    if (!instances || this.holdMs === undefined || !(this.holdMs > 0)) return undefined;
    return (instances * this.config.maxConcurrency * 1000) / this.holdMs;
  }

  private run(job: ClaimedJob, claimedAt: number, firstLead: Promise<Lead> | undefined): void {
    const locked = job.request.lock !== undefined;
    const startedAt = performance.now();
    this.observer.claimed(job.priority, job.arrivalMs, locked, claimedAt);
    this.queueWait.claimed(job.priority, claimedAt - job.arrivalMs, locked);
    const abort = new AbortController();
    const entry: Running = {
      job,
      callId: job.callId,
      abort,
      leaseUntil: performance.now() + this.leaseMs,
      leaseLost: false,
      done: Promise.resolve(),
    };
    entry.done = this.execute(entry, claimedAt, firstLead).finally(() => {
      this.running.delete(job.key);
      const heldMs = performance.now() - startedAt;
      this.holdMs = this.holdMs === undefined ? heldMs : this.holdMs + HOLD_SMOOTHING * (heldMs - this.holdMs);
      // Waiting work is claimed when an admission brings it (it claims along) or the idle
      // poll finds it; a finished job looks for more at once only when some may be waiting
      // for its slot, or its lock may have freed a parked job. Otherwise it only makes sure
      // the idle poll runs (a full instance has none scheduled).
      this.wake(this.backlog || job.request.lock !== undefined ? 0 : IDLE_POLL_MS);
    });
    this.running.set(job.key, entry);
  }

  private async execute(entry: Running, claimedAt: number, firstLead: Promise<Lead> | undefined): Promise<void> {
    const { job, abort } = entry;
    const log = this.jobLog(job);
    if (job.recordedReply !== undefined) {
      // An earlier holder recorded the job's reply and was lost before completing it.
      await this.completion.recorded(job, job.recordedReply, log, abort.signal);
      return;
    }
    const lock = job.request.lock;
    if (lock !== undefined) log().info({ lock, fence: job.fence }, 'lock granted');
    let reply: Reply;
    let leading = false;
    let bookkeeping: Bookkeeping = {};
    try {
      if (job.cacheKey !== undefined && firstLead) {
        const shared = await this.followOrLead(entry, job.cacheKey, firstLead);
        if (shared) {
          if (this.debugLines) log().debug('answered by an identical request in flight');
          this.observer.coalescedAnswer();
          const facts = { cached: true, attempts: 0, claimedAt, upstreamMs: 0, now: this.clock() };
          await this.completion.held(job, okReply(job, shared, facts), log, abort.signal);
          return;
        }
        leading = true;
      }
      const result = await this.upstream.call({
        requestId: job.id,
        deviceId: job.deviceId,
        priority: job.priority,
        requestedModel: job.request.model,
        body: buildUpstreamBody(
          job.request,
          isEmbeddingRequest(job.request) ? this.config.embeddingModel : this.config.upstreamModel,
        ),
        headers: lock === undefined ? {} : { 'X-Lock-Key': lock, 'X-Lock-Fence': String(job.fence) },
        deadline: job.deadlineMs,
        maxAttempts: Math.max(1, this.config.maxAttempts - job.attempts),
        beforeAttempt: (attempt) => this.beforeAttempt(entry, attempt),
        onRateLimited: (retryAfterMs) => {
          this.store.pauseUpstream(this.clock() + retryAfterMs).catch((err: unknown) => {
            log().warn({ err }, 'could not pause the upstream for the fleet');
          });
        },
        signal: abort.signal,
      });
      this.observer.answered(result);
      reply = okReply(job, answerFields(result), {
        cached: false,
        attempts: job.attempts + result.attempts,
        claimedAt,
        upstreamMs: result.upstreamMs,
        now: this.clock(),
      });
      bookkeeping = await this.afterAnswer(entry, result, log);
      if (this.debugLines) log().debug({ attempts: reply.attempts, upstreamMs: result.upstreamMs }, 'request answered');
    } catch (err) {
      const gone = err instanceof LeaseLost || abort.signal.aborted;
      if (gone && leading && job.cacheKey !== undefined) {
        // No completion follows, so the flight ends here: identical requests lead in turn.
        await this.store.unlead(job.cacheKey, job.key).catch(() => undefined);
      }
      if (err instanceof LeaseLost) {
        log().warn('lease lost before an attempt could start: the job is left to whoever holds it now');
        return;
      }
      if (abort.signal.aborted) return; // shutdown: released to the queue by stop()
      const error = toBridgeError(err);
      if (error.code === 'internal') log().error({ err }, 'request failed');
      else log().warn({ code: error.code }, `request failed: ${error.message}`);
      reply = errorReply(job.id, error, job.priority);
    }
    // Identical requests waiting on this one find the answer in the cache once the completion
    // is recorded, or lead in turn.
    if (leading && job.cacheKey !== undefined) bookkeeping.unlead = job.cacheKey;
    await this.completion.held(job, reply, log, abort.signal, bookkeeping);
  }

  /**
   * Coalescing: the first of identical requests calls the upstream; the others wait for its
   * answer in the cache (holding their leases) and lead in turn if it fails.
   */
  private async followOrLead(entry: Running, cacheKey: string, firstLead: Promise<Lead>): Promise<CachedAnswer | undefined> {
    const { job } = entry;
    let lead = await firstLead;
    for (;;) {
      if ('answer' in lead) return lead.answer;
      if (lead.leader === job.key) return undefined;
      await sleep(FOLLOW_POLL_MS, undefined, { signal: entry.abort.signal });
      if (entry.leaseLost) throw new LeaseLost();
      lead = nth(await this.store.lead([{ cacheKey, jobKey: job.key }], this.leaseMs, this.clock()), 0);
    }
  }

  /**
   * Bookkeeping of an upstream answer: the real token count now (it frees TPM budget); the
   * cache entry and usage with the completion, in the same store call.
   */
  private async afterAnswer(entry: Running, result: UpstreamResult, log: LazyLog): Promise<Bookkeeping> {
    const { job } = entry;
    const bookkeeping: Bookkeeping = {};
    if (job.cacheKey !== undefined) {
      bookkeeping.cache = { key: job.cacheKey, answer: answerFields(result), ttlMs: this.config.cacheTtlS * 1000 };
    }
    if (result.usage) {
      const usage = pricedUsage(job, result.model, result.usage, this.config.prices);
      this.observer.usage(usage.model, usage.promptTokens, usage.completionTokens, usage.costUsd);
      bookkeeping.usage = usage;
      if (this.config.rateLimitTpm !== undefined) {
        // Never at the cost of the device's answer.
        await this.store.settleTokens(entry.callId, result.usage.total_tokens).catch((err: unknown) => {
          log().warn({ err }, 'could not settle the call\'s tokens');
        });
      }
    }
    return bookkeeping;
  }

  /** Runs before every upstream attempt: the lease must cover the whole attempt, and a retry needs rate budget. */
  private async beforeAttempt(entry: Running, attempt: number): Promise<void> {
    if (entry.leaseLost || performance.now() + this.config.upstreamTimeoutMs >= entry.leaseUntil) throw new LeaseLost();
    if (attempt === 1) return; // the claim already took this call's rate token
    const { job } = entry;
    let waited = false;
    for (;;) {
      const now = this.clock();
      const take = await this.store.takeRate(job.tokenEstimate, this.config.rateLimitRpm, this.config.rateLimitTpm, now);
      if (take.ok) {
        entry.callId = take.callId;
        return;
      }
      if (job.deadlineMs !== undefined && take.retryAtMs >= job.deadlineMs) {
        throw new BridgeError('expired', 'ttl_ms passed while a retry waited for upstream rate budget');
      }
      if (!waited) this.observer.rateLimitWait();
      this.queueWait.claimHeld();
      waited = true;
      await sleep(Math.max(1, take.retryAtMs - now), undefined, { signal: entry.abort.signal });
      if (entry.leaseLost || performance.now() + this.config.upstreamTimeoutMs >= entry.leaseUntil) throw new LeaseLost();
    }
  }

  private async expire(job: ExpiredJob): Promise<void> {
    const log = this.jobLog(job);
    if (job.recordedReply !== undefined) {
      // Its reply was recorded (and maybe published) before it went back to the queue: that
      // reply, not `expired`, is its answer.
      log().info('deadline passed in the queue after the reply was recorded: answering with it');
      await this.completion.unheld(job, job.recordedReply, log, this.stopped.signal);
      return;
    }
    log().info('request expired in the queue');
    const reply = errorReply(job.id, new BridgeError('expired', 'ttl_ms passed before an upstream call could start'), job.priority);
    await this.completion.unheld(job, reply, log, this.stopped.signal);
  }

  private async renew(): Promise<void> {
    const entries = [...this.running.values()];
    if (entries.length === 0) return;
    const sentAt = performance.now();
    try {
      const held = await this.store.renew(
        this.owner,
        entries.map((e) => e.job.key),
        this.leaseMs,
        this.clock(),
      );
      entries.forEach((entry, i) => {
        if (held[i]) entry.leaseUntil = sentAt + this.leaseMs;
        else entry.leaseLost = true;
      });
    } catch (err) {
      // Not renewed: leaseUntil stays as it was, so attempts stop once it is too close.
      this.logger.warn({ err }, 'lease renewal failed');
    }
  }

  private async reap(): Promise<void> {
    try {
      const exhausted = await this.store.reap(this.config.maxAttempts, this.clock());
      for (const job of exhausted) {
        const log = this.jobLog(job);
        // Never one with a recorded reply: the reap requeues those for a claim to publish it.
        const error = new BridgeError('upstream_error', `gave up after ${job.attempts} attempts whose holders stopped`);
        await this.completion.unheld(job, errorReply(job.id, error, job.priority), log, this.stopped.signal);
      }
      if (exhausted.length > 0) this.wake();
    } catch (err) {
      this.logger.warn({ err }, 'reap failed');
    }
  }
}
