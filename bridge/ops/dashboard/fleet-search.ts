// A device search across a Redis fleet: the asking instance publishes the query on one
// channel every instance listens to; each answers with what it knows (the device's
// connections to it, its replies from it) on the asker's own channel. Nothing is stored, and
// nothing costs Redis anything until an operator searches.
import type { Redis } from 'ioredis';
import type { Logger } from '../../logger.js';
import type { DeviceView } from './model.js';

/** How long a search waits for the other instances. */
const ANSWER_WAIT_MS = 500;

export interface FleetSearchOptions {
  /** The store's connection, for PUBLISH; a duplicate of it subscribes. */
  redis: Redis;
  /** `{prefix}:dashboard:devices` */
  channel: string;
  instance: string;
  /** What this instance knows about devices matching a query. */
  local(query: string): DeviceView[];
  /** Instances on this Redis, this one included; undefined when unknown. */
  instances(): number | undefined;
  logger: Logger;
}

interface Pending {
  devices: DeviceView[];
  answers: number;
  expected: number;
  done(): void;
}

export class FleetSearch {
  private seq = 0;
  private readonly pending = new Map<number, Pending>();

  private constructor(
    private readonly options: FleetSearchOptions,
    private readonly subscriber: Redis,
  ) {}

  static async open(options: FleetSearchOptions): Promise<FleetSearch> {
    // ioredis subscribes again by itself after a reconnection.
    const subscriber = options.redis.duplicate({ connectionName: `${options.channel}:${options.instance}`, lazyConnect: true });
    const search = new FleetSearch(options, subscriber);
    subscriber.on('message', (channel: string, message: string) => search.onMessage(channel, message));
    subscriber.on('error', (err: Error) => options.logger.debug({ err }, 'dashboard search connection error'));
    try {
      await subscriber.connect();
      await subscriber.subscribe(options.channel, search.ownChannel);
    } catch (err) {
      subscriber.disconnect();
      throw err;
    }
    return search;
  }

  private get ownChannel(): string {
    return `${this.options.channel}:${this.options.instance}`;
  }

  /** The other instances' answers for `query`, as many as come within ANSWER_WAIT_MS. */
  async ask(query: string): Promise<DeviceView[]> {
    const expected = (this.options.instances() ?? 2) - 1;
    if (expected <= 0) return [];
    const n = ++this.seq;
    const answered = new Promise<void>((resolve) => {
      this.pending.set(n, { devices: [], answers: 0, expected, done: resolve });
    });
    let timer: NodeJS.Timeout | undefined;
    try {
      await this.options.redis.publish(this.options.channel, JSON.stringify({ from: this.options.instance, n, q: query }));
      await Promise.race([answered, new Promise((resolve) => (timer = setTimeout(resolve, ANSWER_WAIT_MS)))]);
      return this.pending.get(n)?.devices ?? [];
    } finally {
      clearTimeout(timer);
      this.pending.delete(n);
    }
  }

  async close(): Promise<void> {
    await this.subscriber.quit().catch(() => this.subscriber.disconnect());
  }

  private onMessage(channel: string, message: string): void {
    try {
      if (channel === this.options.channel) this.answer(JSON.parse(message) as { from: string; n: number; q: string });
      else if (channel === this.ownChannel) this.collect(JSON.parse(message) as { n: number; devices: DeviceView[] });
    } catch (err) {
      this.options.logger.warn({ err }, 'bad dashboard search message');
    }
  }

  private answer({ from, n, q }: { from: string; n: number; q: string }): void {
    if (from === this.options.instance || typeof q !== 'string') return;
    const body = JSON.stringify({ n, devices: this.options.local(q) });
    this.options.redis.publish(`${this.options.channel}:${from}`, body).catch((err: unknown) => {
      this.options.logger.warn({ err }, 'could not answer a dashboard search');
    });
  }

  private collect({ n, devices }: { n: number; devices: DeviceView[] }): void {
    const pending = this.pending.get(n);
    if (!pending) return; // answered after the wait
    pending.devices.push(...devices);
    pending.answers += 1;
    if (pending.answers >= pending.expected) pending.done();
  }
}
