// One claimed job from claim to reply: coalescing (follow an identical request in flight, or
// lead and call), the upstream call within its lease and rate budget, then the completion.
import { setTimeout as sleep } from 'node:timers/promises';
import { type Answer, BridgeError, type ChatMessage, isEmbeddingRequest, LeaseLost, type Reply, toBridgeError } from '../../contract/index.js';
import type { Coalescer } from '../coalescing/coalescer.js';
import { lazyChild, type LazyLog, type Logger } from '../logger.js';
import { leaseTooShort, type HeldLease } from '../recovery/leases.js';
import { answerBookkeeping, pricedUsage, type Bookkeeping, type Completion } from '../results/completion.js';
import { errorReply, invalidOutputReply, okReply } from '../results/replies.js';
import type { Results } from '../results/results.js';
import type { StreamPublisher } from '../results/stream.js';
import type { ClaimedJob } from '../model/job.js';
import type { Lead, Store } from '../store/port.js';
import type { AttemptSpend } from '../upstream/attempt-spend.js';
import { buildUpstreamBody, inlineImage, type ChatBody } from '../upstream/body.js';
import { outputChecks, type OutputFormat, type OutputVerdict } from '../upstream/output-check.js';
import { OutputRounds } from '../upstream/output-rounds.js';
import type { UpstreamCall, UpstreamResult } from '../upstream/client.js';
import type { QueueWaitSink, SchedulerConfig, SchedulerObserver, Upstream } from './deps.js';

/** A job in flight on one of our slots. */
export interface Running extends HeldLease {
  job: ClaimedJob;
  /** The rate-window entry taken for the job's next (or latest) upstream attempt. */
  callId: string;
  /** An attempt went out on callId: its outcome settles it (afterAttempt, or the answer's usage). */
  callUsed?: boolean;
  /** Shared by the jobs started since the last stop(), which aborts them all (Scheduler). */
  abort: AbortController;
  done: Promise<void>;
}

export interface RunDeps {
  config: SchedulerConfig;
  store: Pick<Store, 'answers' | 'limits'>;
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
      this.callUnused(entry, log);
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
  private async answeredShared(entry: Running, cacheKey: string, firstLead: Lead | Promise<Lead>, claimedAt: number, log: LazyLog): Promise<boolean> {
    const { job, abort } = entry;
    const shared = await this.deps.coalescer.followOrLead(entry, cacheKey, firstLead);
    if (!shared) return false;
    if (this.debugLines) log().debug('answered by an identical request in flight');
    this.callUnused(entry, log);
    this.deps.observer.coalescedAnswer();
    const facts = { cached: true, attempts: 0, claimedAt, upstreamMs: 0, now: this.deps.clock() };
    await this.deps.completion.held(job, okReply(job, shared, facts), log, abort.signal);
    return true;
  }

  /**
   * The job's own upstream call: its reply, and in `outcome` what its completion books. An
   * answer that breaks the request's output schema is asked again (OUTPUT_RETRIES), each time
   * one more upstream call with its own rate budget and usage record; still wrong, the reply
   * is `invalid_output`.
   */
  private async callUpstream(entry: Running, claimedAt: number, log: LazyLog, outcome: Outcome): Promise<Reply> {
    const { job } = entry;
    const stream = this.streamOf(job);
    const check = isEmbeddingRequest(job.request) ? undefined : outputChecks.forRequest(job.request);
    const rounds = new OutputRounds();
    let verdict: OutputVerdict | undefined;
    try {
      for (;;) {
        const result = await this.deps.upstream.call(this.upstreamCall(entry, log, stream, check?.format, rounds.messages));
        this.deps.observer.answered(result);
        rounds.add(result);
        verdict = check?.check(result.content);
        if (verdict === undefined || verdict.ok || !this.asksAgain(job, rounds)) break;
        outcome.bookkeeping = { spent: await this.bookEarlier(entry, rounds, result, log) };
        log().info({ violation: verdict.violation, round: rounds.count }, 'answer breaks its output schema: asking again');
        rounds.askAgain(result.content, verdict.violation);
        stream?.reset();
        await this.retryBudget(entry);
      }
    } finally {
      // Every chunk leaves before the reply (or the error) that ends the request.
      if (stream) await stream.close();
    }
    return this.replyOf(entry, claimedAt, rounds, verdict, log, outcome);
  }

  /** Whether an answer that breaks its schema is asked again: retries left, and time. */
  private asksAgain(job: ClaimedJob, rounds: OutputRounds): boolean {
    if (rounds.count > (this.deps.config.outputRetries ?? 1)) return false;
    return job.deadlineMs === undefined || this.deps.clock() < job.deadlineMs;
  }

  /** The reply of the job's calls, the last one's bookkeeping in `outcome` (with what they all spent). */
  private async replyOf(
    entry: Running,
    claimedAt: number,
    rounds: OutputRounds,
    verdict: OutputVerdict | undefined,
    log: LazyLog,
    outcome: Outcome,
  ): Promise<Reply> {
    const { job } = entry;
    const answer = rounds.answer(verdict?.ok === true ? verdict.data : undefined);
    const facts = { cached: false, attempts: job.attempts + rounds.attempts, claimedAt, upstreamMs: rounds.upstreamMs, now: this.deps.clock() };
    const bookkeeping = await this.afterAnswer(entry, answer, rounds, log);
    if (verdict !== undefined && !verdict.ok) {
      delete bookkeeping.cache; // only valid answers are shared
      outcome.bookkeeping = bookkeeping;
      log().warn({ violation: verdict.violation, calls: rounds.count }, 'answer breaks its output schema: invalid_output');
      return invalidOutputReply(job, verdict.violation, verdict.raw);
    }
    outcome.bookkeeping = bookkeeping;
    const reply = okReply(job, answer, facts);
    if (this.debugLines) log().debug({ attempts: reply.attempts, upstreamMs: rounds.upstreamMs }, 'request answered');
    return reply;
  }

  /** The stream of a `"stream": true` chat request; none for any other. */
  private streamOf(job: ClaimedJob): StreamPublisher | undefined {
    if (isEmbeddingRequest(job.request) || job.request.stream !== true) return undefined;
    return this.deps.streams.openStream(job.deviceId, job.id, this.deps.logger);
  }

  private upstreamCall(entry: Running, log: LazyLog, stream: StreamPublisher | undefined, output: OutputFormat | undefined, more: ChatMessage[]): UpstreamCall {
    const { job, abort } = entry;
    const { config, store } = this.deps;
    const lock = job.request.lock;
    const body = buildUpstreamBody(job.request, isEmbeddingRequest(job.request) ? config.embeddingModel : config.upstreamModel);
    return {
      requestId: job.id,
      deviceId: job.deviceId,
      priority: job.priority,
      requestedModel: job.request.model,
      body: more.length === 0 ? body : { ...body, messages: [...(body as ChatBody).messages, ...more] },
      output,
      inline: inlineImage(job.image),
      headers: lock === undefined ? undefined : { 'X-Lock-Key': lock, 'X-Lock-Fence': String(job.fence) },
      deadline: job.deadlineMs,
      maxAttempts: Math.max(1, config.maxAttempts - job.attempts),
      beforeAttempt: (attempt) => this.beforeAttempt(entry, attempt),
      afterAttempt: (spent) => this.afterAttempt(entry, spent, log),
      onRateLimited: (retryAfterMs) => {
        store.limits.pauseUpstream(this.deps.clock() + retryAfterMs).catch((err: unknown) => {
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
      await this.deps.store.answers.unlead(job.cacheKey, job.key).catch(() => undefined);
    }
    if (err instanceof LeaseLost) {
      this.callUnused(entry, log);
      log().warn('lease lost before an attempt could start: the job is left to whoever holds it now');
      return undefined;
    }
    if (abort.signal.aborted) return undefined; // shutdown: released to the queue by stop()
    const error = toBridgeError(err);
    // Each attempt that went out was settled by its own outcome; a call taken for none is unused.
    this.callUnused(entry, log);
    if (error.code === 'internal') log().error({ err }, 'request failed');
    else log().warn({ code: error.code }, `request failed: ${error.message}`);
    return errorReply(job.id, error, job.priority);
  }

  /**
   * Bookkeeping of the last upstream answer: the real token count now (it frees TPM budget);
   * the cache entry and usage with the completion, in the same store call.
   */
  private async afterAnswer(entry: Running, answer: Answer, rounds: OutputRounds, log: LazyLog): Promise<Bookkeeping> {
    const { config, observer } = this.deps;
    const last = rounds.last;
    const bookkeeping = answerBookkeeping(entry.job, answer, config);
    delete bookkeeping.usage;
    if (!last?.usage) return bookkeeping;
    const usage = pricedUsage(entry.job, last.model, last.usage, config.prices, rounds.count === 1);
    bookkeeping.usage = usage;
    bookkeeping.spent = rounds.spend(usage);
    observer.usage(usage.model, usage.promptTokens, usage.completionTokens, usage.costUsd, usage.template);
    await this.settleAnswered(entry, last.usage.total_tokens, log);
    return bookkeeping;
  }

  /** An answer asked again: its call's usage is booked now (one call, one record); returns what all calls spent so far. */
  private async bookEarlier(entry: Running, rounds: OutputRounds, result: UpstreamResult, log: LazyLog): Promise<Bookkeeping['spent']> {
    const { config, store, observer, clock } = this.deps;
    if (!result.usage) return rounds.spend(undefined);
    const usage = pricedUsage(entry.job, result.model, result.usage, config.prices, rounds.count === 1);
    rounds.booked(usage);
    observer.usage(usage.model, usage.promptTokens, usage.completionTokens, usage.costUsd, usage.template);
    await store.answers.recordUsage(usage, clock()).catch((err: unknown) => log().warn({ err }, 'could not record the usage of an answer asked again'));
    await this.settleAnswered(entry, result.usage.total_tokens, log);
    return rounds.spend(undefined);
  }

  /** The call's real token count frees TPM budget (never at the cost of the device's answer). */
  private async settleAnswered(entry: Running, tokens: number, log: LazyLog): Promise<void> {
    if (this.deps.config.rateLimitTpm === undefined) return;
    await this.deps.store.limits.settleTokens(entry.callId, tokens).catch((err: unknown) => {
      log().warn({ err }, "could not settle the call's tokens");
    });
  }

  /**
   * The job's latest call took its estimate from RATE_LIMIT_TPM's window and no attempt went out
   * on it: it counts 0 from now, so it does not hold the fleet's window for a minute.
   */
  private callUnused(entry: Running, log: LazyLog): void {
    if (entry.callUsed === true) return;
    this.settleUnused(entry, log);
  }

  /**
   * An attempt went out on the latest call: refused before generating, it counts 0 from now; one
   * that may have generated keeps its estimate; an answered one is settled with its usage.
   */
  private afterAttempt(entry: Running, spent: AttemptSpend, log: LazyLog): void {
    entry.callUsed = true;
    if (spent === 'nothing') this.settleUnused(entry, log);
  }

  private settleUnused(entry: Running, log: LazyLog): void {
    if (this.deps.config.rateLimitTpm === undefined) return;
    this.deps.store.limits.settleTokens(entry.callId, 0).catch((err: unknown) => {
      log().warn({ err }, "could not settle the call's tokens");
    });
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
      const take = await store.limits.takeRate(job.tokenEstimate, config.rateLimitRpm, config.rateLimitTpm, now);
      if (take.ok) {
        entry.callId = take.callId;
        entry.callUsed = false;
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
