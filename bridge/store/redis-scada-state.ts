// ScadaState on Redis, shared by every instance of a fleet (keys in redis-keys.ts): the last
// good answers in a zset (recency, age) beside a hash (records), bdSeq and the Edge Node's
// lease as one small key per node, events on a pub/sub channel read by a connection of its own.
import type { Redis } from 'ioredis';
import type { ScadaAnswer } from '../../contract/index.js';
import type { Logger } from '../logger.js';
import { library } from './lua-library.js';
import { redisKeys, type RedisKeys } from './redis-keys.js';
import type { ScadaEvent, ScadaState, ScadaStateBounds } from './scada-state.js';

export interface RedisScadaStateOptions {
  prefix: string;
  bounds: ScadaStateBounds;
  logger?: Logger | undefined;
  clock?: () => number;
}

export class RedisScadaState implements ScadaState {
  private readonly keys: RedisKeys;
  private readonly bounds: ScadaStateBounds;
  private readonly clock: () => number;
  private readonly listeners = new Set<(event: ScadaEvent) => void>();
  private subscriber: Promise<Redis> | undefined;

  constructor(
    /** The store's connection; this class never closes it. */
    private readonly redis: Redis,
    private readonly options: RedisScadaStateOptions,
  ) {
    this.keys = redisKeys(options.prefix);
    this.bounds = options.bounds;
    this.clock = options.clock ?? Date.now;
  }

  async keepGood(answer: ScadaAnswer): Promise<void> {
    const record = JSON.stringify(answer);
    if (Buffer.byteLength(record) > this.bounds.maxRecordBytes) return;
    const args = [fieldOf(answer.deviceId, answer.template), record, this.clock(), this.bounds.ttlS * 1000, this.bounds.maxEntries];
    await library.call(this.redis, 'scada-keep', [this.keys.scadaGood, this.keys.scadaRecords], args);
  }

  async lastGood(deviceId: string, template: string): Promise<ScadaAnswer | undefined> {
    const args = [fieldOf(deviceId, template), this.clock(), this.bounds.ttlS * 1000];
    const record = await library.call(this.redis, 'scada-last', [this.keys.scadaGood, this.keys.scadaRecords], args);
    return typeof record === 'string' ? parse(record) : undefined;
  }

  async allGood(limit: number): Promise<ScadaAnswer[]> {
    if (limit <= 0) return [];
    const args = [this.clock(), this.bounds.ttlS * 1000, limit];
    const records = (await library.call(this.redis, 'scada-all', [this.keys.scadaGood, this.keys.scadaRecords], args)) as unknown[];
    return records.map((r) => (typeof r === 'string' ? parse(r) : undefined)).filter((a): a is ScadaAnswer => a !== undefined);
  }

  async nextBdSeq(node: string): Promise<number> {
    return Number(await library.call(this.redis, 'scada-bdseq', [this.keys.scadaBdSeq(node)], []));
  }

  async holdLease(node: string, owner: string, ttlMs: number): Promise<boolean> {
    return (await library.call(this.redis, 'scada-hold', [this.keys.scadaLease(node)], [owner, ttlMs])) === 1;
  }

  async releaseLease(node: string, owner: string): Promise<void> {
    await library.call(this.redis, 'scada-release', [this.keys.scadaLease(node)], [owner]);
  }

  async openSession(node: string): Promise<number | undefined> {
    const bdSeq = await this.redis.get(this.keys.scadaSession(node));
    return bdSeq === null ? undefined : Number(bdSeq);
  }

  async setOpenSession(node: string, bdSeq: number | undefined): Promise<void> {
    if (bdSeq === undefined) await this.redis.del(this.keys.scadaSession(node));
    else await this.redis.set(this.keys.scadaSession(node), String(bdSeq));
  }

  async announce(event: ScadaEvent): Promise<void> {
    await this.redis.publish(this.keys.scadaEvents, JSON.stringify(event));
  }

  async onAnnounce(listener: (event: ScadaEvent) => void): Promise<() => Promise<void>> {
    this.listeners.add(listener);
    try {
      await (this.subscriber ??= this.subscribe());
    } catch (err) {
      this.listeners.delete(listener);
      this.subscriber = undefined;
      throw err;
    }
    return async () => {
      this.listeners.delete(listener);
    };
  }

  async close(): Promise<void> {
    this.listeners.clear();
    const subscriber = await this.subscriber?.catch(() => undefined);
    this.subscriber = undefined;
    await subscriber?.quit().catch(() => subscriber.disconnect());
  }

  /** A connection of its own (a subscribed one can do nothing else); ioredis subscribes again after a reconnection. */
  private async subscribe(): Promise<Redis> {
    const channel = this.keys.scadaEvents;
    const subscriber = this.redis.duplicate({ connectionName: `edge-ai-bridge:${this.options.prefix}:scada`, lazyConnect: true });
    subscriber.on('error', (err: Error) => this.options.logger?.debug({ err: err.message }, 'SCADA events connection error'));
    subscriber.on('message', (from: string, message: string) => {
      if (from === channel) this.deliver(message);
    });
    try {
      await subscriber.connect();
      await subscriber.subscribe(channel);
    } catch (err) {
      subscriber.disconnect();
      throw err;
    }
    return subscriber;
  }

  private deliver(message: string): void {
    let event: ScadaEvent;
    try {
      event = JSON.parse(message) as ScadaEvent;
    } catch (err) {
      this.options.logger?.warn({ err }, 'bad SCADA event on Redis');
      return;
    }
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (err) {
        this.options.logger?.warn({ err }, 'a SCADA event listener failed');
      }
    }
  }
}

/** Device ids and template names hold no `/` (contract/topics.ts, contract/payloads.ts). */
const fieldOf = (deviceId: string, template: string): string => `${deviceId}/${template}`;

function parse(record: string): ScadaAnswer | undefined {
  try {
    return JSON.parse(record) as ScadaAnswer;
  } catch {
    return undefined;
  }
}
