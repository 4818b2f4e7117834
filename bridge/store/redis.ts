// Coordination for a fleet of instances on one Redis. Each step is one Lua function (lua/),
// so every instance sees one queue, one set of locks and one rate budget.
import type { Redis } from 'ioredis';
import { BridgeError, PRIORITIES, type Reply } from '../../contract/index.js';
import type { BudgetCharge } from '../model/budget-charge.js';
import { admitCall, admitOutcome, withImages } from './redis-admission.js';
import { RedisSpend, settlementOf, type BudgetPeriod, type BudgetUse } from './budget-spend.js';
import { library, libraryWithoutFairShare, type LuaArg, type LuaLibrary } from './lua-library.js';
import { redisKeys, type RedisKeys } from './redis-keys.js';
import {
  cacheValue,
  freshOldRecordedReply,
  freshRecordedReply,
  parseRecorded,
  readCached,
  toAdmitResult,
  toClaimResult,
  toJobs,
  usageArgs,
  addUsageFields,
} from './redis-codec.js';
import { Gather } from './gather.js';
import { foldOldFences } from './redis-fences.js';
import type { RedisHealth } from './redis-health.js';
import { UsageBuffer } from './usage-buffer.js';
import { emptyReport, hoursBetween } from './usage-report.js';
import type { CachedAnswer, CompleteOptions, FlightClaim, Lead, UsageRecord, UsageReport, AdmitLimits, AdmitResult, ClaimOptions, ClaimResult, DeadLetterBounds, QueueDepth, QuotaCharge, RateTake, RecordResult, Store } from './port.js';
import type { ClaimedJob, Job } from '../model/job.js';
import { DEFAULT_DEAD_LETTER_BOUNDS } from './dead-letters.js';
import { RedisDeadLetters, type DeadLetterStep } from './redis-dead-letters.js';

/** How long a completion waits for others, to go to Redis in the same write. */
const COMPLETE_GATHER_MS = 2;
/** Jobs moved per upgrade step. */
const UPGRADE_BATCH = 500;
/** Leases handled per reap call, so one call never blocks Redis for long. */
const REAP_BATCH = 500;

/** The store's steps, one Redis function each (lua/<name>.lua). */
type Step = 'admit' | 'claim' | 'take-rate' | 'pause' | 'renew' | 'record' | 'complete' | 'release' | 'reap' | 'drain'
  | 'settle' | 'admit-answered' | 'lead' | 'unlead' | 'usage' | 'upgrade' | 'budget-settle' | 'quota'
  | 'upgrade-fences' | DeadLetterStep;

export interface RedisStoreOptions {
  /** The deployment's key prefix; every key carries it as a hash tag. */
  prefix: string;
  /** Whether Redis answers, and the admissions' cutoff (redis-health.ts); without it, neither is checked. */
  health?: Pick<RedisHealth, 'healthy' | 'admitCutoff'>;
  /**
   * REDIS_WAIT_REPLICAS: an admission is acknowledged only once this many replicas have it
   * (WAIT), or the timeout passed; `short` hears of each WAIT that got fewer. Admissions and
   * their WAITs go through `connection`, their own, since a WAIT holds up everything behind
   * it on its connection (WAIT covers the writes made on the connection it is sent on).
   */
  replicas?: { count: number; timeoutMs: number; connection: Redis; short(acked: number): void };
  /** FAIR_SHARE (default true): fair share within a priority class. */
  fairShare?: boolean;
  /** DLQ_MAX, DLQ_MAX_BYTES, DLQ_TTL_S (default: their defaults). */
  deadLetters?: DeadLetterBounds;
}

export class RedisStore implements Store {
  readonly durable = true;
  private readonly library: LuaLibrary;
  private readonly spend: RedisSpend;
  readonly keys: RedisKeys;
  readonly deadLetters: RedisDeadLetters;
  private readonly usageBuffer: UsageBuffer;
  /** The device has its reply by now: a completion can wait a moment for others to go with. */
  private readonly completions = new Gather(COMPLETE_GATHER_MS);

  private readonly health: RedisStoreOptions['health'];
  private readonly replicas: RedisStoreOptions['replicas'];
  private replication: Promise<void> | undefined;

  constructor(
    private readonly redis: Redis,
    options: RedisStoreOptions,
  ) {
    this.keys = redisKeys(options.prefix);
    this.health = options.health;
    this.replicas = options.replicas;
    this.library = options.fairShare === false ? libraryWithoutFairShare : library;
    this.spend = new RedisSpend(redis, this.keys.base, (fn, keys, args) => this.run(fn, keys, args));
    const guard = <T>(pending: Promise<T>): Promise<T> => this.guard(pending);
    this.deadLetters = new RedisDeadLetters(redis, this.keys, options.deadLetters ?? DEFAULT_DEAD_LETTER_BOUNDS, (fn, keys, args) => this.run(fn, keys, args), guard);
    this.usageBuffer = new UsageBuffer((hour, amounts) => this.run('usage', [this.keys.usage(String(hour))], usageArgs(amounts)).then(() => undefined));
  }

  async admit(job: Job, limits: AdmitLimits, now: number, claim?: ClaimOptions): Promise<AdmitResult> {
    const { keys, args } = admitCall(this.keys, this.spend, job, limits, now, claim, this.health?.admitCutoff() ?? '');
    const result = (await this.run('admit', keys, args, this.replicas?.connection)) as [string, ...unknown[]];
    if (result[0] === 'queued') await this.replicated();
    const outcome = admitOutcome(result, job, claim);
    if (outcome.kind === 'queued' && outcome.along) await this.guard(withImages(this.redis, this.keys, outcome.along.claim.jobs, job));
    return outcome;
  }

  async chargeQuota(deviceId: string, rpm: number, now: number): Promise<QuotaCharge> {
    const [kind, wait] = (await this.run('quota', [this.keys.quota(deviceId)], [this.keys.base, rpm, now])) as [string, string?];
    return kind === 'ok' ? { ok: true } : { ok: false, retryAfterMs: Number(wait) };
  }

  /**
   * Moves what 0.6 left in Redis (queued and running jobs, the upstream's budget) and 0.7's
   * per-lock fences into this version's layout, in batches so Redis is never held for long;
   * returns the jobs moved.
   */
  async upgrade(now: number): Promise<number> {
    const k = this.keys;
    await foldOldFences(this.redis, k, (keys, lockIds) => this.run('upgrade-fences', keys, lockIds), (p) => this.guard(p));
    await this.deadLetters.upgrade(now);
    const [jobs, ...others] = k.legacy as [string, ...string[]];
    if ((await this.guard(this.redis.exists(jobs, ...others))) === 0) return 0;
    const step = (jobKeys: string[]) => this.run('upgrade', k.legacy, [k.base, now, ...jobKeys]);
    let moved = 0;
    let cursor = '0';
    // Each step deletes what it moved: scan (a pass may miss fields the hash rehashed) until none is left.
    while ((await this.guard(this.redis.hlen(jobs))) > 0) {
      const [next, flat] = await this.guard(this.redis.hscan(jobs, cursor, 'COUNT', UPGRADE_BATCH));
      cursor = next;
      const jobKeys = flat.filter((_, i) => i % 2 === 0);
      if (jobKeys.length > 0) moved += (await step(jobKeys)) as number;
    }
    await step([]);
    return moved;
  }

  async claim(options: ClaimOptions, now: number): Promise<ClaimResult> {
    const k = this.keys;
    const [claimed, expired, retryAt] = (await this.run(
      'claim',
      [k.queue],
      [k.base, options.owner, options.max, options.leaseMs, options.rpm, options.tpm ?? '', now],
    )) as [string[], string[], string];
    const result = toClaimResult(claimed, expired, retryAt, options.owner);
    await this.guard(withImages(this.redis, k, result.jobs));
    return result;
  }

  async takeRate(tokens: number, rpm: number, tpm: number | undefined, now: number): Promise<RateTake> {
    const k = this.keys;
    const [ok, idOrAt] = (await this.run('take-rate', [k.queue], [k.base, tokens, rpm, tpm ?? '', now])) as [number, string];
    return ok === 1 ? { ok: true, callId: idOrAt } : { ok: false, retryAtMs: Number(idOrAt) };
  }

  async settleTokens(callId: string, tokens: number): Promise<void> {
    await this.run('settle', [this.keys.queue], [this.keys.base, callId, Math.max(0, Math.round(tokens))]);
  }

  async pauseUpstream(untilMs: number): Promise<void> {
    await this.run('pause', [this.keys.queue], [this.keys.base, untilMs, Date.now()]);
  }

  async renew(owner: string, keys: string[], leaseMs: number, now: number): Promise<boolean[]> {
    if (keys.length === 0) return [];
    const held = (await this.run('renew', [this.keys.queue], [this.keys.base, owner, leaseMs, now, ...keys])) as number[];
    return held.map((h) => h === 1);
  }

  async recordReply(job: Job, reply: Reply, owner: string): Promise<RecordResult> {
    const k = this.keys;
    const [kind, earlier] = (await this.run('record', [k.idem(job.key)], [k.base, owner, JSON.stringify(reply)])) as [
      string,
      string?,
    ];
    if (kind === 'recorded' || kind === 'lost') return { kind };
    if (kind === 'kept') return { kind, reply: parseRecorded(earlier) };
    throw new BridgeError('internal', `record answered ${kind}`);
  }

  async complete(job: Job, reply: Reply, options: CompleteOptions, now: number): Promise<void> {
    const spend = this.spend.settlement(settlementOf(job.budget ?? [], options.spent ?? options.usage)); // by the first answer only (complete.lua)
    const k = this.keys;
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
    const dropped = (await this.completions.run(() => this.run('complete', keys, args))) as number;
    if (dropped > 0) this.deadLetters.noteDropped(dropped);
    if (usage) this.usageBuffer.add(usage, now);
  }

  async release(jobs: ClaimedJob[], _now: number): Promise<void> {
    const k = this.keys;
    const byOwner = new Map<string, string[]>();
    for (const job of jobs) byOwner.set(job.owner, [...(byOwner.get(job.owner) ?? []), job.key]);
    for (const [owner, keys] of byOwner) {
      await this.run('release', [k.queue], [k.base, owner, ...keys]);
    }
  }

  async reap(maxAttempts: number, now: number): Promise<Job[]> {
    const k = this.keys;
    const exhausted = (await this.run('reap', [k.queue], [k.base, now, maxAttempts, REAP_BATCH])) as string[];
    return toJobs(exhausted);
  }

  async drain(): Promise<Job[]> {
    return toJobs((await this.run('drain', [this.keys.queue], [this.keys.base])) as string[]);
  }

  async storedReply(key: string, now: number): Promise<Reply | undefined> {
    const idem = this.keys.idem(key);
    try {
      return freshRecordedReply(await this.redis.get(idem), now);
    } catch (err) {
      if (!(err instanceof Error && err.message.startsWith('WRONGTYPE'))) return this.guard(Promise.reject(err));
      return freshOldRecordedReply(await this.guard(this.redis.hmget(idem, 'state', 'exp', 'reply', 'x', 'y')), now);
    }
  }

  async queueBytes(): Promise<number> {
    return Number(await this.guard(this.redis.get(this.keys.qbytes)));
  }

  async queueDepth(): Promise<QueueDepth> {
    const raw = await this.guard(this.redis.hgetall(this.keys.depth));
    return Object.fromEntries(PRIORITIES.map((p) => [p, Number(raw[p] ?? 0)])) as QueueDepth;
  }

  settleBudgets(settled: Array<{ charge: BudgetCharge; used: number }>): Promise<void> {
    return this.spend.settle(settled);
  }

  budgetUse(periods: BudgetPeriod[]): Promise<BudgetUse[]> {
    return this.guard(this.spend.use(periods));
  }

  async admitAnswered(job: Job, reply: Reply, ttlS: number, now: number): Promise<AdmitResult> {
    const k = this.keys;
    const result = (await this.run(
      'admit-answered',
      [k.idem(job.key)],
      [k.base, JSON.stringify(reply), now, ttlS * 1000, this.health?.admitCutoff() ?? ''],
      this.replicas?.connection,
    )) as [string, string?];
    if (result[0] === 'answered') await this.replicated();
    return toAdmitResult(result, 'admit-answered');
  }

  async cacheGet(cacheKey: string, now: number): Promise<CachedAnswer | undefined> {
    return readCached(await this.guard(this.redis.get(this.keys.cache(cacheKey))), now);
  }

  async cacheSet(cacheKey: string, answer: CachedAnswer, ttlMs: number, now: number): Promise<void> {
    await this.guard(this.redis.set(this.keys.cache(cacheKey), cacheValue(answer, ttlMs, now), 'PX', ttlMs));
  }

  async lead(flights: FlightClaim[], leaseMs: number, now: number): Promise<Lead[]> {
    if (flights.length === 0) return [];
    const keys: string[] = [];
    for (const { cacheKey } of flights) keys.push(this.keys.cache(cacheKey), this.keys.flight(cacheKey));
    const flat = (await this.run('lead', keys, [leaseMs, now, ...flights.map((f) => f.jobKey)])) as string[];
    const leads: Lead[] = [];
    for (let i = 0; i < flat.length; i += 2) {
      leads.push(flat[i] === 'answer' ? { answer: JSON.parse(flat[i + 1] ?? 'null') as CachedAnswer } : { leader: flat[i + 1] ?? '' });
    }
    return leads;
  }

  async unlead(cacheKey: string, jobKey: string): Promise<void> {
    await this.run('unlead', [this.keys.flight(cacheKey)], [jobKey]);
  }

  async recordUsage(record: UsageRecord, now: number): Promise<void> {
    this.usageBuffer.add(record, now);
  }

  async usage(fromMs: number, toMs: number): Promise<UsageReport> {
    await this.usageBuffer.flush(); // this instance's own counts included
    const report = emptyReport(fromMs, toMs);
    const hours = hoursBetween(fromMs, toMs);
    const pipeline = this.redis.pipeline();
    for (const hour of hours) pipeline.hgetall(this.keys.usage(String(hour)));
    const results = (await this.guard(pipeline.exec())) ?? [];
    for (const [, fields] of results) addUsageFields(report, (fields ?? {}) as Record<string, string>);
    return report;
  }

  async close(): Promise<void> {
    this.completions.flush();
    await this.usageBuffer.flush().catch(() => undefined);
  }

  /**
   * Waits until the replicas have this connection's writes so far (REDIS_WAIT_REPLICAS), so
   * a failover cannot lose an admission the device was told of. The admissions of one
   * event-loop turn share one WAIT. Fewer replicas in time: the admission stands (it is in
   * the primary) and `short` is told. No answer (the primary died meanwhile): `unavailable`,
   * never an acknowledgement of what may be gone.
   */
  private replicated(): Promise<void> {
    const replicas = this.replicas;
    if (!replicas) return Promise.resolve();
    this.replication ??= new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
      this.replication = undefined;
      const acked = await this.guard(replicas.connection.wait(replicas.count, replicas.timeoutMs));
      if (acked < replicas.count) replicas.short(acked);
    });
    return this.replication;
  }

  private run(step: Step, keys: string[], args: LuaArg[], connection: Redis = this.redis): Promise<unknown> {
    // Known silent: refused at once rather than left to time out behind the others.
    if (this.health?.healthy() === false) return Promise.reject(new BridgeError('unavailable', 'Redis is not answering'));
    return this.guard(this.library.call(connection, step, keys, args));
  }

  /** Redis out of reach is `unavailable` (never faked locally); a script error is a bug. */
  private async guard<T>(pending: Promise<T>): Promise<T> {
    try {
      return await pending;
    } catch (err) {
      if (err instanceof Error && err.name === 'ReplyError') {
        throw new BridgeError('internal', `Redis refused a step: ${err.message}`);
      }
      throw new BridgeError('unavailable', `cannot reach Redis: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}
