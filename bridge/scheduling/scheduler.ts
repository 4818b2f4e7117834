// The claim loop: keeps up to MAX_CONCURRENCY jobs in flight, renews their leases while
// upstream calls run, and turns every ending (answer, failure, expiry) into one reply.
import { setMaxListeners } from 'node:events';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Coalescer, type KnownLead } from '../coalescing/coalescer.js';
import type { Logger } from '../logger.js';
import { DeadlineWatch } from '../recovery/deadlines.js';
import { answerExpired } from '../recovery/expired.js';
import { LeaseRenewal, leaseMsFor } from '../recovery/leases.js';
import { Reaper } from '../recovery/reaper.js';
import { Completion, STORE_RETRY_MS } from '../results/completion.js';
import { storeFailed, storeOutage } from '../store/outage.js';
import type { ConditionReport } from '../repeating-log.js';
import type { ClaimAlong, ClaimOptions, ClaimResult, Lead } from '../store/port.js';
import type { ClaimedJob, ExpiredJob } from '../model/job.js';
import { HoldTime } from './capacity.js';
import { NO_OBSERVER, NO_QUEUE_WAIT, type QueueWaitSink, type SchedulerConfig, type SchedulerDeps, type SchedulerObserver } from './deps.js';
import type { Dispatch } from './dispatch.js';
import { JobRunner, type Running } from './run-job.js';
import { Slots } from './slots.js';

export type { QueueWaitSink, SchedulerConfig, SchedulerDeps, SchedulerObserver, Upstream } from './deps.js';

/** Idle poll: other instances (Redis) admit jobs this one is not told about. */
const IDLE_POLL_MS = 100;

/** A job's `done` until its run starts (at once): one settled promise for all. */
const SETTLED = Promise.resolve();

/** A controller whose signal many jobs may wait on at once without a leak warning. */
function unlimitedAbort(): AbortController {
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  return controller;
}

export class Scheduler implements Dispatch {
  private readonly running = new Map<string, Running>();
  private readonly leaseMs: number;
  private stopping = false;
  /** Aborted once stop() is done: ends completion retries that nothing else would end. */
  private readonly stopped = new AbortController();
  /**
   * The abort of every job started since: stop() aborts all unfinished jobs at once, so they
   * share one controller (one per job cost more than the rest of a claim's bookkeeping). A
   * fresh one replaces it once aborted, so no later job starts aborted.
   */
  private jobsAbort = unlimitedAbort();
  private pumping = false;
  private pumpAgain = false;
  private readonly slots: Slots;
  private wakeTimer: NodeJS.Timeout | undefined;
  private wakeAt = 0;
  private readonly holdTime = new HoldTime();
  /** Record, publish, complete: how every ending becomes the job's one reply. */
  private readonly completion: Completion;
  private readonly coalescer: Coalescer;
  private readonly runner: JobRunner;
  private readonly renewal: LeaseRenewal;
  private readonly reaper: Reaper;
  /** Answers a queued request `expired` at its deadline even when no claim would run then. */
  private readonly deadlines: DeadlineWatch;

  private readonly config: SchedulerConfig;
  private readonly store: SchedulerDeps['store'];
  private readonly logger: Logger;
  private readonly owner: string;
  private readonly clock: () => number;
  private readonly observer: SchedulerObserver;
  private readonly queueWait: QueueWaitSink;
  private readonly outage: ConditionReport;

  constructor(deps: SchedulerDeps) {
    const { config, store, upstream, results, logger, owner, clock = Date.now, observer = NO_OBSERVER, queueWait = NO_QUEUE_WAIT } = deps;
    const outage = deps.outage ?? storeOutage(logger);
    this.config = config;
    this.store = store;
    this.logger = logger;
    this.owner = owner;
    this.clock = clock;
    this.observer = observer;
    this.queueWait = queueWait;
    this.outage = outage;
    this.leaseMs = leaseMsFor(config.upstreamTimeoutMs);
    const completion = new Completion(config, store, results, clock, (u) => observer.usage(u.model, u.promptTokens, u.completionTokens, u.costUsd, u.template));
    this.completion = completion;
    this.slots = new Slots(config.maxConcurrency, () => this.running.size);
    this.coalescer = new Coalescer(store, this.leaseMs, clock);
    this.runner = new JobRunner({ config, store, upstream, completion, streams: results, coalescer: this.coalescer, logger, clock, observer, queueWait });
    this.renewal = new LeaseRenewal(store, owner, this.leaseMs, clock, logger, () => [...this.running.values()], outage);
    this.reaper = new Reaper({
      store,
      completion,
      logger,
      outage,
      clock,
      maxAttempts: config.maxAttempts,
      signal: this.stopped.signal,
      onReaped: () => this.wake(),
    });
    this.deadlines = new DeadlineWatch({
      sweep: () => this.sweepExpired(),
      clock,
      retryMs: STORE_RETRY_MS,
      onError: (err) => storeFailed(outage, 'expiry sweep', err, () => logger.warn({ err }, 'expiry sweep failed; retrying')),
    });
  }

  start(): void {
    this.renewal.start();
    this.reaper.start();
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
    this.reaper.stop();
    this.deadlines.stop();
    const all = Promise.allSettled([...this.running.values()].map((r) => r.done));
    const grace = sleep(graceMs, 'timeout' as const, { ref: false });
    if ((await Promise.race([all, grace])) === 'timeout') {
      const unfinished = [...this.running.values()];
      this.logger.warn({ count: unfinished.length }, 'shutdown grace over: handing unfinished requests back to the queue');
      for (const r of unfinished) r.abort.abort();
      this.jobsAbort = unlimitedAbort();
      await Promise.allSettled(unfinished.map((r) => r.done));
      try {
        await this.store.queue.release(
          unfinished.map((r) => r.job),
          this.clock(),
        );
      } catch (err) {
        // Their leases run out instead, and another instance (or the next start) reaps them.
        this.logger.warn({ err }, 'could not hand unfinished requests back');
      }
    }
    this.renewal.stop();
    this.stopped.abort();
  }

  /**
   * Claim options for an admission to carry (JobQueue.admit), reserving up to CLAIM_ALONG_MAX
   * free slots until adopt(); undefined when there is no free slot (or we are stopping).
   */
  claimAlong(): ClaimOptions | undefined {
    if (this.stopping) return undefined;
    const reserved = this.slots.reserve();
    return reserved === 0 ? undefined : this.claimOptions(reserved);
  }

  /** A request was queued with a deadline: if it still waits then, it is answered `expired` then. */
  watchDeadline(jobKey: string, deadlineMs: number): void {
    // Claimed along with its own admission: it is running, not waiting.
    if (!this.running.has(jobKey)) this.deadlines.watch(jobKey, deadlineMs);
  }

  /**
   * What an admission that carried `claim` brought back (undefined when it queued nothing or
   * failed); ends the reservation. `jobKey`: the admitted job, whose first lead it may carry.
   */
  adopt(claim: ClaimOptions, along: ClaimAlong | undefined, jobKey: string): void {
    this.slots.unreserve(claim.max);
    if (along && this.stopping) {
      this.handBack(along.claim);
    } else if (along) {
      const known = along.lead === undefined ? undefined : { key: jobKey, lead: along.lead };
      const retryAtMs = this.take(along.claim, claim.max, this.clock(), known);
      if (retryAtMs !== undefined) this.wake(retryAtMs - this.clock());
    }
    if (this.slots.takeDeferred()) this.wake();
  }

  /**
   * Jobs `instances` schedulers like this one start per second with every slot busy: their
   * slots over how long a job holds one here (claim to reply, a moving average over the last
   * few dozen jobs). Undefined before the first job ended or without an instance count. The
   * queue-wait guard's capacity.
   */
  capacityPerS(instances: number | undefined): number | undefined {
    return this.holdTime.capacityPerS(instances, this.config.maxConcurrency);
  }

  /** Too late to start them: back to the queue, as stop() does with unfinished jobs. */
  private handBack(claimed: ClaimResult): void {
    for (const job of claimed.expired) this.expire(job);
    this.store.queue.release(claimed.jobs, this.clock()).catch((err: unknown) => {
      this.logger.warn({ err }, 'could not hand claimed requests back');
    });
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
        nextWake = (await this.claimWhileFree()) ?? nextWake;
      } while (this.pumpAgain);
      this.outage.ok('claim');
    } catch (err) {
      storeFailed(this.outage, 'claim', err, () => this.logger.error({ err }, 'claim failed; retrying'));
      nextWake = STORE_RETRY_MS;
    } finally {
      this.pumping = false;
    }
    if (this.slots.free() > 0) this.wake(nextWake);
  }

  /** Claims until the slots are full or the queue has no more; returns the wake delay when held back. */
  private async claimWhileFree(): Promise<number | undefined> {
    while (!this.stopping) {
      const max = this.slots.reserveAll();
      if (max <= 0) {
        this.slots.full();
        break;
      }
      const now = this.clock();
      this.deadlines.claimStarted(now);
      let claimed: ClaimResult;
      try {
        claimed = await this.store.queue.claim(this.claimOptions(max), now);
      } finally {
        this.slots.unreserve(max);
      }
      const retryAtMs = this.take(claimed, max, now);
      if (retryAtMs !== undefined) return Math.max(1, retryAtMs - now);
      // Less than it could take: the queue had no more (expired jobs may have hidden some).
      if (claimed.jobs.length < max && claimed.expired.length === 0) break;
    }
    return undefined;
  }

  /**
   * Starts what a claim brought (the pump's or an admission's) and answers its expired jobs.
   * `known`: a job whose first lead came with it. Returns when to retry, if the claim was
   * stopped by the upstream rate budget or a pause.
   */
  private take(claimed: ClaimResult, asked: number, now: number, known?: KnownLead): number | undefined {
    for (const job of claimed.expired) this.expire(job);
    // Cut short by our capacity, it may have left work queued: finishing jobs look for it.
    this.slots.backlog = claimed.jobs.length >= asked;
    const leads = this.coalescer.leadAll(claimed.jobs, now, known);
    claimed.jobs.forEach((job, i) => this.run(job, now, leads[i]));
    if (claimed.retryAtMs !== undefined) this.queueWait.claimHeld();
    else if (!this.slots.backlog && claimed.expired.length === 0) this.queueWait.queueDrained();
    return claimed.retryAtMs;
  }

  private expire(job: ExpiredJob): void {
    this.deadlines.settle(job.key);
    void answerExpired(job, this.completion, this.logger, this.stopped.signal);
  }

  /** A claim of no jobs: it only takes the expired ones out of the queue, to be answered. */
  private async sweepExpired(): Promise<void> {
    if (this.stopping) return;
    const claimed = await this.store.queue.claim(this.claimOptions(0), this.clock());
    this.outage.ok('expiry sweep');
    for (const job of claimed.expired) this.expire(job);
  }

  private run(job: ClaimedJob, claimedAt: number, firstLead: Lead | Promise<Lead> | undefined): void {
    this.deadlines.settle(job.key);
    const locked = job.request.lock !== undefined;
    const startedAt = performance.now();
    this.observer.claimed(job.priority, job.arrivalMs, locked, claimedAt);
    this.queueWait.claimed(job.priority, claimedAt - job.arrivalMs, locked);
    const abort = this.jobsAbort;
    const entry: Running = {
      job,
      callId: job.callId,
      abort,
      leaseUntil: performance.now() + this.leaseMs,
      leaseLost: false,
      done: SETTLED,
    };
    entry.done = this.runner.execute(entry, claimedAt, firstLead).finally(() => {
      this.running.delete(job.key);
      this.holdTime.record(performance.now() - startedAt);
      // Waiting work is claimed when an admission brings it (it claims along) or the idle
      // poll finds it; a finished job looks for more at once only when some may be waiting
      // for its slot, or its lock may have freed a parked job. Otherwise it only makes sure
      // the idle poll runs (a full instance has none scheduled).
      this.wake(this.slots.backlog || job.request.lock !== undefined ? 0 : IDLE_POLL_MS);
    });
    this.running.set(job.key, entry);
  }
}
