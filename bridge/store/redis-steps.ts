// What every role of the Redis store shares: the connection, the keys, and how one step (one
// Lua function) is sent and its failure told apart (Redis out of reach, or a refused script).
import type { Redis } from 'ioredis';
import { BridgeError } from '../../contract/index.js';
import { library, libraryWithoutFairShare, type LuaArg, type LuaLibrary } from './lua-library.js';
import { StepBatch } from './step-batch.js';
import type { RedisHealth } from './redis-health.js';
import type { RedisKeys } from './redis-keys.js';
import type { DeadLetterStep } from './redis-dead-letters.js';

/** The store's steps, one Redis function each (lua/<name>.lua). */
export type Step =
  | 'admit'
  | 'claim'
  | 'take-rate'
  | 'pause'
  | 'renew'
  | 'record'
  | 'complete'
  | 'release'
  | 'reap'
  | 'drain'
  | 'settle'
  | 'admit-answered'
  | 'lead'
  | 'unlead'
  | 'usage'
  | 'upgrade'
  | 'budget-settle'
  | 'quota'
  | 'upgrade-fences'
  | DeadLetterStep;

/**
 * The steps of a request's path, sent together with the others of their event-loop turn
 * (step-batch.ts); the rest (reaps, drains, pages, upgrades) are rare and may be long, and go alone.
 */
const BATCHED: ReadonlySet<Step> = new Set<Step>([
  'admit',
  'admit-answered',
  'claim',
  'renew',
  'record',
  'complete',
  'release',
  'take-rate',
  'settle',
  'quota',
  'lead',
  'unlead',
]);

/** REDIS_WAIT_REPLICAS: see RedisStoreOptions. */
export interface Replicas {
  count: number;
  timeoutMs: number;
  connection: Redis;
  short(acked: number): void;
}

export class RedisSteps {
  private readonly library: LuaLibrary;
  private replication: Promise<void> | undefined;
  private readonly batches = new Map<Redis, StepBatch>();

  constructor(
    readonly redis: Redis,
    readonly keys: RedisKeys,
    private readonly health: Pick<RedisHealth, 'healthy' | 'admitCutoff'> | undefined,
    readonly replicas: Replicas | undefined,
    fairShare: boolean,
  ) {
    this.library = fairShare ? library : libraryWithoutFairShare;
  }

  /** The admissions' cutoff (redis-health.ts), '' when Redis health is not watched. */
  admitCutoff(): number | '' {
    return this.health?.admitCutoff() ?? '';
  }

  run(step: Step, keys: string[], args: LuaArg[], connection: Redis = this.redis): Promise<unknown> {
    // Known silent: refused at once rather than left to time out behind the others.
    if (this.health?.healthy() === false) return Promise.reject(new BridgeError('unavailable', 'Redis is not answering'));
    if (!BATCHED.has(step)) return this.guard(this.library.call(connection, step, keys, args));
    return this.guard(this.batchOf(connection).run({ name: step, keys, args }));
  }

  /** Sends every batch waiting now (shutdown). */
  flush(): void {
    for (const batch of this.batches.values()) batch.flush();
  }

  private batchOf(connection: Redis): StepBatch {
    let batch = this.batches.get(connection);
    if (!batch) this.batches.set(connection, (batch = new StepBatch(this.library, connection)));
    return batch;
  }

  /** Redis out of reach is `unavailable` (never faked locally); a script error is a bug. */
  async guard<T>(pending: Promise<T>): Promise<T> {
    try {
      return await pending;
    } catch (err) {
      if (err instanceof Error && err.name === 'ReplyError') {
        throw new BridgeError('internal', `Redis refused a step: ${err.message}`);
      }
      throw new BridgeError('unavailable', `cannot reach Redis: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  /**
   * Waits until the replicas have this connection's writes so far (REDIS_WAIT_REPLICAS), so
   * a failover cannot lose an admission the device was told of. The admissions of one
   * event-loop turn share one WAIT. Fewer replicas in time: the admission stands (it is in
   * the primary) and `short` is told. No answer (the primary died meanwhile): `unavailable`,
   * never an acknowledgement of what may be gone.
   */
  replicated(): Promise<void> {
    const replicas = this.replicas;
    if (!replicas) return Promise.resolve();
    this.replication ??= new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
      this.replication = undefined;
      const acked = await this.guard(replicas.connection.wait(replicas.count, replicas.timeoutMs));
      if (acked < replicas.count) replicas.short(acked);
    });
    return this.replication;
  }
}
