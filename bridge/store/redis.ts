// Coordination for a fleet of instances on one Redis. Each step is one Lua function (lua/),
// so every instance sees one queue, one set of locks and one rate budget. The store is its four
// roles (port.ts), each in its own file, over one connection and one key layout.
import type { Redis } from 'ioredis';
import { RedisSpend } from './budget-spend.js';
import { redisKeys, type RedisKeys } from './redis-keys.js';
import { usageArgs } from './redis-codec.js';
import { foldOldFences } from './redis-fences.js';
import type { RedisHealth } from './redis-health.js';
import { UsageBuffer } from './usage-buffer.js';
import { DEFAULT_DEAD_LETTER_BOUNDS } from './dead-letters.js';
import { RedisDeadLetters } from './redis-dead-letters.js';
import { RedisAnswers } from './redis-answers.js';
import { RedisLimits } from './redis-limits.js';
import { RedisOperations } from './redis-operations.js';
import { RedisJobQueue } from './redis-job-queue.js';
import { RedisSteps, type Replicas } from './redis-steps.js';
import type { DeadLetterBounds, Store } from './port.js';

/** Jobs moved per upgrade step. */
const UPGRADE_BATCH = 500;

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
  replicas?: Replicas;
  /** FAIR_SHARE (default true): fair share within a priority class. */
  fairShare?: boolean;
  /** DLQ_MAX, DLQ_MAX_BYTES, DLQ_TTL_S (default: their defaults). */
  deadLetters?: DeadLetterBounds;
}

export class RedisStore implements Store {
  readonly durable = true;
  private readonly keys: RedisKeys;
  readonly queue: RedisJobQueue;
  readonly limits: RedisLimits;
  readonly answers: RedisAnswers;
  readonly operations: RedisOperations;
  private readonly steps: RedisSteps;
  private readonly deadLetters: RedisDeadLetters;
  private readonly usageBuffer: UsageBuffer;

  constructor(
    private readonly redis: Redis,
    options: RedisStoreOptions,
  ) {
    this.keys = redisKeys(options.prefix);
    const steps = new RedisSteps(redis, this.keys, options.health, options.replicas, options.fairShare !== false);
    this.steps = steps;
    const spend = new RedisSpend(redis, this.keys.base, (fn, keys, args) => steps.run(fn, keys, args));
    const guard = <T>(pending: Promise<T>): Promise<T> => steps.guard(pending);
    this.deadLetters = new RedisDeadLetters(
      redis,
      this.keys,
      options.deadLetters ?? DEFAULT_DEAD_LETTER_BOUNDS,
      (fn, keys, args) => steps.run(fn, keys, args),
      guard,
    );
    this.usageBuffer = new UsageBuffer((hour, amounts) => steps.run('usage', [this.keys.usage(String(hour))], usageArgs(amounts)).then(() => undefined));
    this.queue = new RedisJobQueue(steps, spend, this.deadLetters, this.usageBuffer);
    this.limits = new RedisLimits(steps, spend);
    this.answers = new RedisAnswers(steps, this.usageBuffer);
    this.operations = new RedisOperations(steps, this.deadLetters, spend, this.usageBuffer);
  }

  /**
   * Moves what 0.6 left in Redis (queued and running jobs, the upstream's budget) and 0.7's
   * per-lock fences into this version's layout, in batches so Redis is never held for long;
   * returns the jobs moved.
   */
  async upgrade(now: number): Promise<number> {
    const k = this.keys;
    const guard = <T>(p: Promise<T>): Promise<T> => this.steps.guard(p);
    await foldOldFences(this.redis, k, (keys, lockIds) => this.steps.run('upgrade-fences', keys, lockIds), guard);
    await this.deadLetters.upgrade(now);
    const [jobs, ...others] = k.legacy as [string, ...string[]];
    if ((await guard(this.redis.exists(jobs, ...others))) === 0) return 0;
    const step = (jobKeys: string[]) => this.steps.run('upgrade', k.legacy, [k.base, now, ...jobKeys]);
    let moved = 0;
    let cursor = '0';
    // Each step deletes what it moved: scan (a pass may miss fields the hash rehashed) until none is left.
    while ((await guard(this.redis.hlen(jobs))) > 0) {
      const [next, flat] = await guard(this.redis.hscan(jobs, cursor, 'COUNT', UPGRADE_BATCH));
      cursor = next;
      const jobKeys = flat.filter((_, i) => i % 2 === 0);
      if (jobKeys.length > 0) moved += (await step(jobKeys)) as number;
    }
    await step([]);
    return moved;
  }

  async close(): Promise<void> {
    this.queue.flush();
    this.steps.flush();
    await this.usageBuffer.flush().catch(() => undefined);
  }
}
