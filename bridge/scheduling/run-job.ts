// One claimed job from claim to reply: coalescing (follow an identical request in flight, or
// lead and call), the upstream call within its lease and rate budget, then the completion.
import { setTimeout as sleep } from 'node:timers/promises';
import { BridgeError, isEmbeddingRequest, LeaseLost, type OkReply, type Reply, toBridgeError } from '../../contract/index.js';
import type { Coalescer } from '../coalescing/coalescer.js';
import { lazyChild, type LazyLog, type Logger } from '../logger.js';
import { leaseTooShort, type HeldLease } from '../recovery/leases.js';
import { answerBookkeeping, type Bookkeeping, type Completion } from '../results/completion.js';
import { errorReply, okReply } from '../results/replies.js';
import type { Results } from '../results/results.js';
import type { StreamPublisher } from '../results/stream.js';
import type { ClaimedJob, Lead, Store } from '../store/types.js';
import { buildUpstreamBody, inlineImage } from '../upstream/body.js';
import type { UpstreamCall, UpstreamResult } from '../upstream/client.js';
import type { QueueWaitSink, SchedulerConfig, SchedulerObserver, Upstream } from './deps.js';

/** A job in flight on one of our slots. */
export interface Running extends HeldLease {
  job: ClaimedJob;
  /** The rate-window entry of the latest upstream call, settled with the reported usage. */
  callId: string;
  /** Shared by the jobs started since the last stop(), which aborts them all (Scheduler). */
  abort: AbortController;
  done: Promise<void>;
}

export interface RunDeps {
  config: SchedulerConfig;
  store: Store;
  upstream: Upstream;
  /** Record, publish, complete: how every ending becomes the job's one reply. */
  completion: Completion;
  /** Where a streamed request's text goes as it is written. */
  streams: Pick<Results, 'openStream'>;
  coalescer: Coalescer;
  logger: Logger;
  clock: () => number;
  observer: SchedulerObserver;
  queueWait: QueueWaitSink;
}

/** What a run carries from its upstream call to its completion. */
interface Outcome {
  /** It leads a coalescing flight, which its completion (or its loss) ends. */
  leading: boolean;
  bookkeeping: Bookkeeping;
}

export class JobRunner {
  /** Read once: per-request debug lines are skipped without building their logger. */
  private readonly debugLines: boolean;

  constructor(private readonly deps: RunDeps) {
    this.debugLines = deps.logger.isLevelEnabled('debug');
  }

  /** Runs a claimed job to its one reply, or leaves it to whoever holds its lease now. */
  async execute(entry: Running, claimedAt: number, firstLead: Lead | Promise<Lead> | undefined): Promise<void> {
    const { job, abort } = entry;
    const log = lazyChild(this.deps.logger, { reqId: job.id, deviceId: job.deviceId });
    if (job.recordedReply !== undefined) {
      // An earlier holder recorded the job's reply and was lost before completing it.
      await this.deps.completion.recorded(job, job.recordedReply, log, abort.signal);
      return;
    }
    const lock = job.request.lock;
    if (lock !== undefined) log().info({ lock, fence: job.fence }, 'lock granted');
    const outcome: Outcome = { leading: false, bookkeeping: {} };
    let reply: Reply | undefined;
    try {
      if (job.cacheKey !== undefined && firstLead) {
        // Known to lead already (its admission claimed it): nothing to wait for.
        const leads = !(firstLead instanceof Promise) && 'leader' in firstLead && firstLead.leader === job.key;
        if (!leads && (await this.answeredShared(entry, job.cacheKey, firstLead, claimedAt, log))) return;
        outcome.leading = true;
      }
      reply = await this.callUpstream(entry, claimedAt, log, outcome);
    } catch (err) {
      reply = await this.failed(entry, err, outcome.leading, log);
      if (reply === undefined) return;
    }
    // Identical requests waiting on this one find the answer in the cache once the completion
    // is recorded, or lead in turn.
    if (outcome.leading && job.cacheKey !== undefined) outcome.bookkeeping.unlead = job.cacheKey;
    await this.deps.completion.held(job, reply, log, abort.signal, outcome.bookkeeping);
  }

  /** Follows an identical request in flight; true when its answer became this job's reply. */
  private async answeredShared(
    entry: Running,
    cacheKey: string,
    firstLead: Lead | Promise<Lead>,
    claimedAt: number,
    log: LazyLog,
  ): Promise<boolean> {
    const { job, abort } = entry;
    const shared = await this.deps.coalescer.followOrLead(entry, cacheKey, firstLead);
    if (!shared) return false;
    if (this.debugLines) log().debug('answered by an identical request in flight');
    this.deps.observer.coalescedAnswer();
    const facts = { cached: true, attempts: 0, claimedAt, upstreamMs: 0, now: this.deps.clock() };
    await this.deps.completion.held(job, okReply(job, shared, facts), log, abort.signal);
    return true;
  }

  /** The job's own upstream call: its ok reply, and in `outcome` what its completion books. */
  private async callUpstream(entry: Running, claimedAt: number, log: LazyLog, outcome: Outcome): Promise<OkReply> {
    const { job } = entry;
    const stream = this.streamOf(job);
    let result: UpstreamResult;
    try {
      result = await this.deps.upstream.call(this.upstreamCall(entry, log, stream));
    } finally {
      // Every chunk leaves before the reply (or the error) that ends the request.
      if (stream) await stream.close();
    }
    this.deps.observer.answered(result);
    const reply = okReply(job, result, {
      cached: false,
      attempts: job.attempts + result.attempts,
      claimedAt,
      upstreamMs: result.upstreamMs,
      now: this.deps.clock(),
    });
    const bookkeeping = this.afterAnswer(entry, result, log);
    outcome.bookkeeping = bookkeeping instanceof Promise ? await bookkeeping : bookkeeping;
    if (this.debugLines) log().debug({ attempts: reply.attempts, upstreamMs: result.upstreamMs }, 'request answered');
    return reply;
  }

  /** The stream of a `"stream": true` chat request; none for any other. */
  private streamOf(job: ClaimedJob): StreamPublisher | undefined {
    if (isEmbeddingRequest(job.request) || job.request.stream !== true) return undefined;
    return this.deps.streams.openStream(job.deviceId, job.id, this.deps.logger);
  }

  private upstreamCall(entry: Running, log: LazyLog, stream: StreamPublisher | undefined): UpstreamCall {
    const { job, abort } = entry;
    const { config, store } = this.deps;
    const lock = job.request.lock;
    return {
      requestId: job.id,
      deviceId: job.deviceId,
      priority: job.priority,
      requestedModel: job.request.model,
      body: buildUpstreamBody(job.request, isEmbeddingRequest(job.request) ? config.embeddingModel : config.upstreamModel),
      inline: inlineImage(job.image),
      headers: lock === undefined ? undefined : { 'X-Lock-Key': lock, 'X-Lock-Fence': String(job.fence) },
      deadline: job.deadlineMs,
      maxAttempts: Math.max(1, config.maxAttempts - job.attempts),
      beforeAttempt: (attempt) => this.beforeAttempt(entry, attempt),
      onRateLimited: (retryAfterMs) => {
        store.pauseUpstream(this.deps.clock() + retryAfterMs).catch((err: unknown) => {
          log().warn({ err }, 'could not pause the upstream for the fleet');
        });
      },
      signal: abort.signal,
      stream,
    };
  }

  /** The error reply of a run that failed; undefined when it has no reply to give (lease lost, shutdown). */
  private async failed(entry: Running, err: unknown, leading: boolean, log: LazyLog): Promise<Reply | undefined> {
    const { job, abort } = entry;
    const gone = err instanceof LeaseLost || abort.signal.aborted;
    if (gone && leading && job.cacheKey !== undefined) {
      // No completion follows, so the flight ends here: identical requests lead in turn.
      await this.deps.store.unlead(job.cacheKey, job.key).catch(() => undefined);
    }
    if (err instanceof LeaseLost) {
      log().warn('lease lost before an attempt could start: the job is left to whoever holds it now');
      return undefined;
    }
    if (abort.signal.aborted) return undefined; // shutdown: released to the queue by stop()
    const error = toBridgeError(err);
    if (error.code === 'internal') log().error({ err }, 'request failed');
    else log().warn({ code: error.code }, `request failed: ${error.message}`);
    return errorReply(job.id, error, job.priority);
  }

  /**
   * Bookkeeping of an upstream answer: the real token count now (it frees TPM budget); the
   * cache entry and usage with the completion, in the same store call.
   */
  private afterAnswer(entry: Running, result: UpstreamResult, log: LazyLog): Bookkeeping | Promise<Bookkeeping> {
    const { config, store, observer } = this.deps;
    const bookkeeping = answerBookkeeping(entry.job, result, config);
    const { usage } = bookkeeping;
    if (!usage || !result.usage) return bookkeeping;
    observer.usage(usage.model, usage.promptTokens, usage.completionTokens, usage.costUsd, usage.template);
    if (config.rateLimitTpm === undefined) return bookkeeping;
    // Never at the cost of the device's answer.
    return store.settleTokens(entry.callId, result.usage.total_tokens).then(
      () => bookkeeping,
      (err: unknown) => {
        log().warn({ err }, 'could not settle the call\'s tokens');
        return bookkeeping;
      },
    );
  }

  /**
   * Runs before every upstream attempt: the lease must cover the whole attempt, and a retry
   * needs rate budget. No promise for the first attempt: the claim already took its rate token.
   */
  private beforeAttempt(entry: Running, attempt: number): Promise<void> | undefined {
    if (leaseTooShort(entry, this.deps.config.upstreamTimeoutMs)) throw new LeaseLost();
    return attempt === 1 ? undefined : this.retryBudget(entry);
  }

  /** A retry's rate token: waits for the budget while it lasts (never past the deadline or the lease). */
  private async retryBudget(entry: Running): Promise<void> {
    const { config, store, observer, queueWait } = this.deps;
    const { job } = entry;
    let waited = false;
    for (;;) {
      const now = this.deps.clock();
      const take = await store.takeRate(job.tokenEstimate, config.rateLimitRpm, config.rateLimitTpm, now);
      if (take.ok) {
        entry.callId = take.callId;
        return;
      }
      if (job.deadlineMs !== undefined && take.retryAtMs >= job.deadlineMs) {
        throw new BridgeError('expired', 'ttl_ms passed while a retry waited for upstream rate budget');
      }
      if (!waited) observer.rateLimitWait();
      queueWait.claimHeld();
      waited = true;
      await sleep(Math.max(1, take.retryAtMs - now), undefined, { signal: entry.abort.signal });
      if (leaseTooShort(entry, config.upstreamTimeoutMs)) throw new LeaseLost();
    }
  }
}
