// Whether this bridge instance is the only one on its deployment's Redis. While it is, the
// broker's emitter delivers its publishes itself instead of sending each through Redis
// pub/sub and receiving it back (broker/cluster.ts), a large share of the CPU a request costs a
// single instance with REDIS_URL (docs/performance.md).
//
// Each instance keeps one connection SUBSCRIBEd to `{prefix}:instances`; PUBSUB NUMSUB counts
// them. A subscription lives exactly as long as its connection, so a crashed instance stops
// counting at once and a stalled one (GC, overload) never stops counting. Nothing is ever
// published on that channel.
//
// Being wrong about "alone" loses publishes, so every doubt answers "not alone" (publishes go
// through Redis, as they would without this):
// - a count is trusted for TRUST_MS from when it was asked, and re-asked every POLL_MS;
// - a failed count, a count other than 1, or our own marker not subscribed: not alone;
// - an instance that finds others when it joins waits JOIN_WAIT_MS (> TRUST_MS) before the
//   broker starts, so by the time it accepts a connection every other instance has either
//   counted it or stopped trusting its last count.
// Redis Cluster counts subscribers per node, so there the instance never considers itself alone.
import type { Redis, RedisOptions } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../logger.js';
import type { ConditionReport } from '../repeating-log.js';
import { reportConnection } from './outage.js';

export const POLL_MS = 250;
export const TRUST_MS = 500;
export const JOIN_WAIT_MS = 1000;

export interface PresenceOptions {
  /** Connection for PUBSUB NUMSUB and INFO (the store's). */
  query: Redis;
  /** Opens the marker connection to the same server (REDIS_URL or Sentinel: the caller knows which). */
  openMarker: (options: RedisOptions) => Redis;
  /** `{prefix}:instances` */
  channel: string;
  /** The marker connection's CLIENT SETNAME. */
  connectionName: string;
  logger: Logger;
  /** Where the marker connection's errors and recoveries go: the store's outage. */
  report: ConditionReport;
}

export class Presence {
  private aloneUntil = 0;
  private asked = 0;
  private applied = 0;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Our own marker is subscribed: without it a count of 1 would be someone else. */
  private marked = false;
  /** Bumped whenever the marker drops: a count asked before that says nothing about now. */
  private epoch = 0;
  private lastCount: number | undefined;
  /** The last line logged about the count. */
  private reported = '';
  private readonly marker: Redis;

  private constructor(
    private readonly opts: PresenceOptions,
    private readonly clustered: boolean,
  ) {
    this.marker = opts.openMarker({ connectionName: opts.connectionName, lazyConnect: true, maxRetriesPerRequest: null });
    reportConnection(this.marker, 'presence', opts.report);
    this.marker.on('close', () => {
      this.marked = false;
      this.epoch += 1;
      this.aloneUntil = 0;
    });
    // After a reconnect, subscribe again ourselves: "ready" may come before ioredis' own
    // resubscription is acknowledged.
    this.marker.on('ready', () => void this.mark().catch(() => undefined));
  }

  private async mark(): Promise<void> {
    await this.marker.subscribe(this.opts.channel);
    this.marked = this.marker.status === 'ready';
  }

  /**
   * Subscribes this instance's marker and starts counting; resolves once the broker may
   * start (after JOIN_WAIT_MS when other instances were already there).
   */
  static async join(opts: PresenceOptions): Promise<Presence> {
    const clustered = /^cluster_enabled:1/m.test(await opts.query.info('cluster').catch(() => ''));
    const presence = new Presence(opts, clustered);
    let live: number | undefined;
    try {
      await presence.marker.connect();
      await presence.mark();
      live = await presence.count();
    } catch (err) {
      presence.marker.disconnect();
      throw err;
    }
    presence.timer = setInterval(() => void presence.count(), POLL_MS);
    presence.timer.unref();
    if (live !== 1) await sleep(JOIN_WAIT_MS);
    return presence;
  }

  /** True only while this instance is, by a recent count, the only one. */
  get alone(): boolean {
    return performance.now() < this.aloneUntil;
  }

  /** How many instances the last count found; undefined when it failed or cannot count (Redis Cluster). */
  get instances(): number | undefined {
    return this.lastCount;
  }

  /** Counts the instances and updates `alone`; the count, or undefined when it failed. */
  private async count(): Promise<number | undefined> {
    const seq = ++this.asked;
    const epoch = this.epoch;
    const askedAt = performance.now();
    let live: number | undefined;
    try {
      const reply = (await this.opts.query.pubsub('NUMSUB', this.opts.channel)) as [string, number | string];
      live = Number(reply[1]);
    } catch {
      live = undefined;
    }
    // Answers can arrive out of order under load: only a newer one may change the verdict.
    if (seq > this.applied) {
      this.applied = seq;
      const sure = live === 1 && this.marked && epoch === this.epoch && !this.clustered && !this.closed;
      this.aloneUntil = sure ? askedAt + TRUST_MS : 0;
      this.lastCount = this.clustered || live === undefined || live < 1 ? undefined : live;
      this.report(live);
    }
    return live;
  }

  /** One line when the count changes (not every poll): operators see when publishes stay local. */
  private report(live: number | undefined): void {
    const line =
      live === undefined
        ? 'cannot count the instances on this Redis: publishes go through Redis pub/sub'
        : live === 1 && !this.clustered
          ? 'alone on this Redis: publishes are delivered here'
          : 'instances on this Redis: publishes go through Redis pub/sub';
    if (this.closed || `${line}${live}` === this.reported) return;
    this.reported = `${line}${live}`;
    // Info either way: the safe choice is made, and Redis out of reach is warned about where it is met.
    this.opts.logger.info(live === undefined ? {} : { instances: live }, line);
  }

  /** Stops counting and unsubscribes the marker; call once the broker has closed. */
  async leave(): Promise<void> {
    this.closed = true;
    this.marked = false;
    this.aloneUntil = 0;
    clearInterval(this.timer);
    await this.marker.quit().catch(() => this.marker.disconnect());
  }
}
