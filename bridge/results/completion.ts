// How a job's ending becomes its one reply (CONTRACT guarantee 1). Nothing acknowledged is
// lost, and a request gets exactly one reply: after a crash the same reply may arrive twice,
// never two different ones. So a job we hold is answered in three steps:
//
//   1. record: the reply goes into the store with the job (JobQueue.recordReply), only while we
//      still hold its lease; lost, we publish nothing and whoever holds it now answers;
//   2. publish it;
//   3. complete: the idempotency record, lease, lock and bookkeeping, in one step.
//
// A crash (or a failed publish) after 1 leaves the reply with the job: its lease runs out, the
// reap requeues it (never dead-letters it) and the next claim hands the reply back, which is
// published as it is (no upstream call, no new attempt) and completed. A crash between 2 and 3
// therefore sends the same reply again, never another. While the store is out of reach, steps
// 1 and 3 are retried (the job keeps its slot) until it is back or shutdown gives up on them.
import { fairCharge } from '../config/fair-share.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Answer, BridgeError, type ErrorCode, type Reply, type Usage } from '../../contract/index.js';
import { priceOf, type Price } from '../config/models.js';
import type { LazyLog } from '../logger.js';
import { answerFields } from './replies.js';
import type { Results } from './results.js';
import type { ClaimedJob, Job } from '../model/job.js';
import type { CompleteOptions, Store, UsageRecord } from '../store/port.js';

/**
 * The failures a replay could turn into an answer, kept for the operator: the upstream failed
 * after its retries or did not answer in time, was out of reach, or the bridge failed
 * (`internal`, a bug a fixed bridge may answer). Never a refusal the request caused or that
 * holds for it as it is (`invalid_request`, `payload_too_large`), nor one about the device's
 * quota, budget, the queue or its own deadline (`rate_limited`, `budget_exceeded`,
 * `queue_full`, `expired`): a replay would be refused the same, and a device could fill the
 * list with them. The device has its reply either way.
 */
const DEAD_LETTER_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['upstream_error', 'upstream_timeout', 'invalid_output', 'unavailable', 'internal']);
export const STORE_RETRY_MS = 1000;

/** What a completion records besides the reply (CompleteOptions' optional part). */
export type Bookkeeping = Pick<CompleteOptions, 'cache' | 'unlead' | 'usage' | 'spent'>;

export interface CompletionConfig {
  idempotencyTtlS: number;
  cacheTtlS: number;
  /** Model → price per million tokens, for the usage's cost. */
  prices: Record<string, Price>;
}

/** Whether a job that ended with `reply` goes on the dead-letter list: decided by the reply alone. */
export function deadLettered(reply: Reply): boolean {
  return !reply.ok && DEAD_LETTER_CODES.has(reply.error.code);
}

/**
 * What an answer books with its completion: the cache entry for identical requests (when the
 * job may share one) and the call's usage, priced.
 */
export function answerBookkeeping(job: Job, answer: Answer, config: Pick<CompletionConfig, 'cacheTtlS' | 'prices'>): Bookkeeping {
  const bookkeeping: Bookkeeping = {};
  if (job.cacheKey !== undefined) {
    bookkeeping.cache = { key: job.cacheKey, answer: answerFields(answer), ttlMs: config.cacheTtlS * 1000 };
  }
  if (answer.usage) bookkeeping.usage = pricedUsage(job, answer.model, answer.usage, config.prices);
  return bookkeeping;
}

/**
 * One answered call's usage, priced. `estimated`: the claim charged the job's fair-share
 * estimate for this call (its first), so the counter gets only the difference.
 */
export function pricedUsage(job: Job, model: string, usage: Usage, prices: Record<string, Price>, estimated = true): UsageRecord {
  const { prompt_tokens: promptTokens, completion_tokens: completionTokens } = usage;
  const price = priceOf(prices, model, job.request.model);
  const costUsd = price ? (promptTokens * price.inputPerMillion + completionTokens * price.outputPerMillion) / 1e6 : 0;
  const record: UsageRecord = { deviceId: job.deviceId, model, priority: job.priority, promptTokens, completionTokens, costUsd };
  if (job.template !== undefined) record.template = job.template;
  // Fair share: its claim charged the estimate; the counter gets the difference to the real use.
  if (job.fairCost !== undefined) record.fairDelta = fairCharge(promptTokens, completionTokens, job.fairWeight ?? 1) - (estimated ? job.fairCost : 0);
  return record;
}

/** A store step given up on: not `unavailable`, or shutdown ended the retries. */
const GAVE_UP = Symbol('gave up');

export class Completion {
  constructor(
    private readonly config: CompletionConfig,
    private readonly store: Pick<Store, 'queue' | 'answers'>,
    private readonly results: Results,
    private readonly clock: () => number,
    /** Usage booked by a completion this module rebuilt from a recorded reply (metrics). */
    private readonly onUsage: (usage: UsageRecord) => void = () => undefined,
  ) {}

  /** A job we hold ended with `reply`: record, publish, complete. */
  async held(job: ClaimedJob, reply: Reply, log: LazyLog, signal: AbortSignal, bookkeeping: Bookkeeping = {}): Promise<void> {
    const recorded = await this.retrying('the reply', log, signal, () => this.store.queue.recordReply(job, reply, job.owner));
    if (recorded === GAVE_UP || recorded.kind === 'lost') {
      if (recorded !== GAVE_UP) log().warn('lease lost before the reply could be recorded: the job is left to whoever holds it now');
      // No completion follows, so the flight ends here: identical requests lead in turn.
      await this.unlead(job, bookkeeping);
      return;
    }
    if (recorded.kind === 'kept') {
      // Our own lease ran out and this instance claimed the job again: the first reply stands.
      log().warn('an earlier run of this job recorded its reply first: publishing that one');
      reply = recorded.reply;
    }
    await this.publishAndComplete(job, reply, log, signal, bookkeeping);
  }

  /**
   * A claimed job carrying the reply an earlier holder recorded before it was lost: that reply
   * is published as it is and completed, with the bookkeeping its holder would have done
   * (cache entry, usage, end of its coalescing flight) rebuilt from it.
   */
  async recorded(job: ClaimedJob, reply: Reply, log: LazyLog, signal: AbortSignal): Promise<void> {
    log().info({ attempts: job.attempts }, 'answering with the reply an earlier holder recorded');
    await this.publishAndComplete(job, reply, log, signal, this.rebuiltBookkeeping(job, reply));
  }

  /**
   * A job nobody holds a lease on (expired in the queue, out of attempts): it left the queue
   * in the step that handed it to us, so nobody else answers it. Publish, then complete.
   */
  async unheld(job: Job, reply: Reply, log: LazyLog, signal: AbortSignal): Promise<void> {
    await this.publishAndComplete(job, reply, log, signal, {});
  }

  private async publishAndComplete(job: Job, reply: Reply, log: LazyLog, signal: AbortSignal, bookkeeping: Bookkeeping): Promise<void> {
    try {
      await this.results.send(job, reply);
    } catch (err) {
      log().error({ err }, 'could not publish the reply; the job is answered again when its lease expires');
      await this.unlead(job, bookkeeping);
      return;
    }
    const options: CompleteOptions = { ttlS: this.config.idempotencyTtlS, deadLetter: deadLettered(reply) };
    // Field by field rather than a spread (V8's slow path), for every completion.
    if (bookkeeping.cache !== undefined) options.cache = bookkeeping.cache;
    if (bookkeeping.unlead !== undefined) options.unlead = bookkeeping.unlead;
    if (bookkeeping.usage !== undefined) options.usage = bookkeeping.usage;
    if (bookkeeping.spent !== undefined) options.spent = bookkeeping.spent;
    await this.retrying('the completion', log, signal, () => this.store.queue.complete(job, reply, options, this.clock()));
  }

  private rebuiltBookkeeping(job: Job, reply: Reply): Bookkeeping {
    const bookkeeping: Bookkeeping = {};
    // Ends the flight if the holder led one (only its own: a no-op otherwise).
    if (job.cacheKey !== undefined) bookkeeping.unlead = job.cacheKey;
    // Shared or cached answers were booked by the call they came from.
    if (!reply.ok || reply.cached) return bookkeeping;
    const booked: Bookkeeping = { ...bookkeeping, ...answerBookkeeping(job, reply, this.config) };
    if (booked.usage) this.onUsage(booked.usage);
    return booked;
  }

  private async unlead(job: Job, bookkeeping: Bookkeeping): Promise<void> {
    if (bookkeeping.unlead !== undefined) await this.store.answers.unlead(bookkeeping.unlead, job.key).catch(() => undefined);
  }

  /** Runs a store step, retried with backoff while the store is `unavailable` and `signal` is not aborted. */
  private async retrying<T>(what: string, log: LazyLog, signal: AbortSignal, step: () => Promise<T>): Promise<T | typeof GAVE_UP> {
    for (let retry = 0; ; retry += 1) {
      try {
        const result = await step();
        if (retry > 0) log().info({ retries: retry }, `${what} recorded after the store came back`);
        return result;
      } catch (err) {
        if (!(err instanceof BridgeError && err.code === 'unavailable') || signal.aborted) {
          log().error({ err }, `could not record ${what}`);
          return GAVE_UP;
        }
        if (retry === 0) log().warn({ err: err.message }, `store unavailable: retrying ${what} until it is back`);
        await sleep(Math.min(250 * 2 ** retry, STORE_RETRY_MS * 5), undefined, { signal }).catch(() => undefined);
      }
    }
  }
}
