// The Redis store's queue and leases: admission (one Lua function deciding quota, repeat,
// cache, QUEUE_MAX, budgets and the enqueue), claims, renewals, recorded replies, completion.
import { BridgeError, type Reply } from '../../contract/index.js';
import type { ClaimedJob, Job } from '../model/job.js';
import { admitCall, admitOutcome, withImages } from './redis-admission.js';
import { settlementOf, type RedisSpend } from './budget-spend.js';
import type { LuaArg } from './lua-library.js';
import { cacheValue, parseRecorded, toClaimResult, toJobs } from './redis-codec.js';
import { Gather } from './gather.js';
import type { RedisDeadLetters } from './redis-dead-letters.js';
import type { RedisSteps } from './redis-steps.js';
import type { UsageBuffer } from './usage-buffer.js';
import type { AdmitLimits, AdmitResult, ClaimOptions, ClaimResult, CompleteOptions, JobQueue, RecordResult } from './port.js';

/** How long a completion waits for others, to go to Redis in the same write. */
const COMPLETE_GATHER_MS = 2;
/** Leases handled per reap call, so one call never blocks Redis for long. */
const REAP_BATCH = 500;

export class RedisJobQueue implements JobQueue {
  /** The device has its reply by now: a completion can wait a moment for others to go with. */
  private readonly completions = new Gather(COMPLETE_GATHER_MS);

  constructor(
    private readonly steps: RedisSteps,
    private readonly spend: RedisSpend,
    private readonly deadLetters: RedisDeadLetters,
    private readonly usageBuffer: UsageBuffer,
  ) {}

  async admit(job: Job, limits: AdmitLimits, now: number, claim?: ClaimOptions): Promise<AdmitResult> {
    const { keys, args } = admitCall(this.steps.keys, this.spend, job, limits, now, claim, this.steps.admitCutoff());
    const result = (await this.steps.run('admit', keys, args, this.steps.replicas?.connection)) as [string, ...unknown[]];
    if (result[0] === 'queued') await this.steps.replicated();
    const outcome = admitOutcome(result, job, claim);
    if (outcome.kind === 'queued' && outcome.along) await this.steps.guard(withImages(this.steps.redis, this.steps.keys, outcome.along.claim.jobs, job));
    return outcome;
  }

  async claim(options: ClaimOptions, now: number): Promise<ClaimResult> {
    const k = this.steps.keys;
    const [claimed, expired, retryAt] = (await this.steps.run(
      'claim',
      [k.queue],
      [k.base, options.owner, options.max, options.leaseMs, options.rpm, options.tpm ?? '', now],
    )) as [string[], string[], string];
    const result = toClaimResult(claimed, expired, retryAt, options.owner);
    await this.steps.guard(withImages(this.steps.redis, k, result.jobs));
    return result;
  }

  async renew(owner: string, keys: string[], leaseMs: number, now: number): Promise<boolean[]> {
    if (keys.length === 0) return [];
    const k = this.steps.keys;
    const held = (await this.steps.run('renew', [k.queue], [k.base, owner, leaseMs, now, ...keys])) as number[];
    return held.map((h) => h === 1);
  }

  async recordReply(job: Job, reply: Reply, owner: string): Promise<RecordResult> {
    const k = this.steps.keys;
    const [kind, earlier] = (await this.steps.run('record', [k.idem(job.key)], [k.base, owner, JSON.stringify(reply)])) as [string, string?];
    if (kind === 'recorded' || kind === 'lost') return { kind };
    if (kind === 'kept') return { kind, reply: parseRecorded(earlier) };
    throw new BridgeError('internal', `record answered ${kind}`);
  }

  async complete(job: Job, reply: Reply, options: CompleteOptions, now: number): Promise<void> {
    const spend = this.spend.settlement(settlementOf(job.budget ?? [], options.spent ?? options.usage)); // by the first answer only (complete.lua)
    const k = this.steps.keys;
    const owner = 'owner' in job && typeof job.owner === 'string' ? job.owner : '';
    const { cache, unlead, usage } = options;
    // The cache entry and the flight are one key: an answer to cache replaces the flight.
    const cacheKey = cache?.key ?? unlead;
    const keys = [k.idem(job.key), ...(cacheKey === undefined ? [] : [k.cache(cacheKey)]), ...spend.keys];
    const args: LuaArg[] = [
      k.base,
      job.key,
      JSON.stringify(reply),
      options.ttlS * 1000,
      now,
      owner,
      options.deadLetter ? this.deadLetters.deadLetterArg(job, reply, now) : '',
      cache ? cacheValue(cache.answer, cache.ttlMs, now) : '',
      cache?.ttlMs ?? 0,
      unlead === undefined ? '0' : '1',
      spend.keys.length,
      ...spend.args,
    ];
    const dropped = (await this.completions.run(() => this.steps.run('complete', keys, args))) as number;
    if (dropped > 0) this.deadLetters.noteDropped(dropped);
    if (usage) this.usageBuffer.add(usage, now);
  }

  async release(jobs: ClaimedJob[], _now: number): Promise<void> {
    const k = this.steps.keys;
    const byOwner = new Map<string, string[]>();
    for (const job of jobs) byOwner.set(job.owner, [...(byOwner.get(job.owner) ?? []), job.key]);
    for (const [owner, keys] of byOwner) {
      await this.steps.run('release', [k.queue], [k.base, owner, ...keys]);
    }
  }

  async reap(maxAttempts: number, now: number): Promise<Job[]> {
    const k = this.steps.keys;
    const exhausted = (await this.steps.run('reap', [k.queue], [k.base, now, maxAttempts, REAP_BATCH])) as string[];
    return toJobs(exhausted);
  }

  async drain(): Promise<Job[]> {
    const k = this.steps.keys;
    return toJobs((await this.steps.run('drain', [k.queue], [k.base])) as string[]);
  }

  /** Sends the completions still gathering now (shutdown). */
  flush(): void {
    this.completions.flush();
  }
}
