// The bridge as ONE Sparkplug B 3.0 Edge Node, whatever the number of instances: the instance
// holding the node's lease (ScadaState) opens its session and publishes; every instance keeps
// the model of devices and metrics from the answers all instances announce, so a takeover
// births current values. Every publish runs on one chain: births, data and deaths never
// interleave and `seq` counts every message after the NBIRTH.
import { sparkplugMetricName, sparkplugStateTopic, sparkplugTopic, type SparkplugMessageType } from '../../../contract/index.js';
import type { SparkplugSettings } from '../../config/sparkplug.js';
import type { Logger } from '../../logger.js';
import type { ScadaEvent, ScadaState } from '../../store/scada-state.js';
import { HostState } from './host-state.js';
import type { LinkSession, SparkplugLink } from './link.js';
import { MAX_DEVICES, NodeModel, type DeviceMetrics, type FieldsOf } from './model.js';
import { asksRebirth, dbirth, ddata, ddeath, nbirth, ndeath } from './payloads.js';

export interface EdgeNodeOptions {
  settings: SparkplugSettings;
  state: ScadaState;
  link: SparkplugLink;
  /** This process's lease owner name. */
  owner: string;
  fieldsOf: FieldsOf;
  log: Logger;
  /** DDEATH after `settings.deviceIdleMs` without an answer (the plant's broker: no disconnect is seen). */
  idleDeaths: boolean;
  /** The lease's lifetime; renewed every third of it. */
  leaseTtlMs?: number;
  /** Wait before opening a session again after a failed attempt or a lost connection. */
  retryMs?: number;
  clock?: () => number;
}

export const DEFAULT_LEASE_TTL_MS = 6000;
const DEFAULT_RETRY_MS = 1000;

interface Session {
  link: LinkSession;
  bdSeq: number;
  /** Its NBIRTH is out. */
  born: boolean;
}

export class EdgeNode {
  private readonly model: NodeModel;
  private readonly host = new HostState();
  private readonly clock: () => number;
  private readonly ttlMs: number;
  private readonly node: string;
  private chain: Promise<void> = Promise.resolve();
  private session: Session | undefined;
  private holding = false;
  /** Until when the lease is surely ours (a renewal that fails is not a loss before this). */
  private heldUntil = 0;
  private seq = 0;
  private stopped = false;
  private renewing = false;
  private timers: NodeJS.Timeout[] = [];
  private unsubscribe: (() => Promise<void>) | undefined;

  constructor(private readonly o: EdgeNodeOptions) {
    this.model = new NodeModel(o.fieldsOf);
    this.clock = o.clock ?? Date.now;
    this.ttlMs = o.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS;
    const { groupId, edgeNodeId } = o.settings;
    this.node = `${groupId}/${edgeNodeId}`;
  }

  /** True while this instance holds the lease and its NBIRTH is out. */
  get publishing(): boolean {
    return this.holding && this.session?.born === true;
  }

  get bdSeq(): number | undefined {
    return this.session?.bdSeq;
  }

  async start(): Promise<void> {
    this.unsubscribe = await this.o.state.onAnnounce((event) => void this.run(() => this.handle(event)));
    await this.renewLease();
    this.every(this.ttlMs / 3, () => void this.renewLease());
    if (this.o.idleDeaths) this.every(Math.min(this.o.settings.deviceIdleMs / 2, 5000), () => void this.run(() => this.idleDeaths()));
  }

  /** A clean stop: the NDEATH is published, the lease given up. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const timer of this.timers) clearInterval(timer);
    await this.unsubscribe?.();
    await this.run(async () => {
      const session = this.session;
      this.session = undefined;
      if (!session) return;
      await session.link.end({ topic: this.topic('NDEATH'), payload: ndeath(session.bdSeq, this.clock()) });
      await this.o.state.setOpenSession(this.node, undefined);
    });
    if (this.holding) await this.o.state.releaseLease(this.node, this.o.owner).catch(() => undefined);
    this.holding = false;
  }

  /** Tests: dies as a killed process would, without an NDEATH, a release or another message. */
  async abandon(): Promise<void> {
    this.stopped = true;
    this.holding = false;
    for (const timer of this.timers) clearInterval(timer);
    await this.unsubscribe?.();
    await this.run(() => this.dropSession());
  }

  /** Flushes the publish chain (tests). */
  idle(): Promise<void> {
    return this.run(async () => {});
  }

  private every(ms: number, tick: () => void): void {
    const timer = setInterval(tick, ms);
    timer.unref();
    this.timers.push(timer);
  }

  private run(step: () => Promise<void>): Promise<void> {
    const next = this.chain.then(step).catch((err: unknown) => this.o.log.warn({ err }, 'sparkplug: step failed'));
    this.chain = next;
    return next;
  }

  private async renewLease(): Promise<void> {
    if (this.stopped || this.renewing) return;
    this.renewing = true;
    const asked = this.clock();
    let held: boolean;
    try {
      held = await this.o.state.holdLease(this.node, this.o.owner, this.ttlMs);
    } catch (err) {
      // The store is out of reach: the lease is ours until it may have expired.
      held = this.holding && this.clock() < this.heldUntil - this.ttlMs / 3;
      this.o.log.warn({ err, held }, 'sparkplug: lease not renewed');
    } finally {
      this.renewing = false;
    }
    if (held) this.heldUntil = asked + this.ttlMs;
    if (this.stopped || held === this.holding) return;
    this.holding = held;
    if (held) {
      this.o.log.info({ node: this.node }, 'sparkplug: Edge Node lease taken: this instance publishes');
      void this.run(() => this.takeOver());
    } else {
      this.o.log.warn({ node: this.node }, 'sparkplug: Edge Node lease lost: publishing stops');
      void this.run(() => this.dropSession());
    }
  }

  /** The current values of every instance's last good answers, then a session of our own. */
  private async takeOver(): Promise<void> {
    for (const answer of (await this.o.state.allGood(MAX_DEVICES)).reverse()) {
      const known = this.model.get(answer.deviceId)?.metrics.has(sparkplugMetricName(answer.template, 'quality'));
      if (known) continue;
      const applied = this.model.apply(answer);
      if (applied) applied.device.lastAnswerAt = this.clock();
    }
    await this.openSession();
  }

  private async openSession(): Promise<void> {
    if (!this.holding || this.stopped || this.session) return;
    const bdSeq = await this.o.state.nextBdSeq(this.node);
    const will = { topic: this.topic('NDEATH'), payload: ndeath(bdSeq, this.clock()) };
    const { primaryHostId } = this.o.settings;
    const filters = [this.topic('NCMD'), ...(primaryHostId === undefined ? [] : [sparkplugStateTopic(primaryHostId)])];
    let link: LinkSession;
    try {
      link = await this.o.link.open(will, filters, {
        message: (topic, payload) => void this.run(() => this.onMessage(link, topic, payload)),
        lost: () => void this.run(() => this.onLost(link)),
      });
    } catch (err) {
      this.o.log.warn({ err }, 'sparkplug: session not opened: trying again');
      this.later(() => this.openSession());
      return;
    }
    if (!this.holding || this.stopped) return link.end(undefined);
    this.session = { link, bdSeq, born: false };
    this.o.log.info({ bdSeq, waitsFor: primaryHostId }, 'sparkplug: session open');
    if (!this.o.link.willOutlivesProcess) await this.endStraySession(link, bdSeq);
    if (primaryHostId === undefined) await this.birth();
  }

  /** Embedded broker: the NDEATH a killed holder could not leave as a Will. */
  private async endStraySession(link: LinkSession, bdSeq: number): Promise<void> {
    const stray = await this.o.state.openSession(this.node);
    if (stray === undefined || stray === bdSeq) return;
    this.o.log.warn({ bdSeq: stray }, "sparkplug: publishing the previous holder's NDEATH");
    await link.publish(this.topic('NDEATH'), ndeath(stray, this.clock()));
    await this.o.state.setOpenSession(this.node, undefined);
  }

  private later(step: () => Promise<void>): void {
    const timer = setTimeout(() => void this.run(step), this.o.retryMs ?? DEFAULT_RETRY_MS);
    timer.unref();
  }

  /** NBIRTH (seq 0, the session's bdSeq), then a DBIRTH for every live device. */
  private async birth(): Promise<void> {
    const session = this.session;
    if (!session || !this.holding) return;
    // Recorded first: a holder killed after its NBIRTH leaves its bdSeq to its successor.
    if (!this.o.link.willOutlivesProcess) await this.o.state.setOpenSession(this.node, session.bdSeq);
    this.seq = 0;
    await session.link.publish(this.topic('NBIRTH'), nbirth(session.bdSeq, this.clock()));
    session.born = true;
    this.model.unbornAll();
    for (const device of this.model.all()) if (!device.dead && device.metrics.size > 0) await this.dbirth(device);
  }

  private async dbirth(device: DeviceMetrics): Promise<void> {
    await this.send('DBIRTH', device.deviceId, dbirth(this.nextSeq(), device.metrics.values(), this.clock()));
    device.born = true;
  }

  private nextSeq(): number {
    this.seq = (this.seq + 1) % 256;
    return this.seq;
  }

  private async send(type: SparkplugMessageType, deviceId: string, payload: Buffer): Promise<void> {
    if (!this.publishing) return;
    await this.session?.link.publish(this.topic(type, deviceId), payload);
  }

  private topic(type: SparkplugMessageType, deviceId?: string): string {
    return sparkplugTopic(this.o.settings.groupId, type, this.o.settings.edgeNodeId, deviceId);
  }

  private async handle(event: ScadaEvent): Promise<void> {
    if (event.kind === 'gone') {
      const device = this.model.get(event.deviceId);
      if (device) await this.ddeath(device);
      return;
    }
    const applied = this.model.apply(event.answer);
    if (!applied) return;
    const { device } = applied;
    device.dead = false;
    device.lastAnswerAt = this.clock();
    if (!this.publishing) return;
    if (applied.birth || !device.born) await this.dbirth(device);
    else if (applied.changed.length > 0) await this.send('DDATA', device.deviceId, ddata(this.nextSeq(), applied.changed, this.clock()));
  }

  private async ddeath(device: DeviceMetrics): Promise<void> {
    device.dead = true;
    if (!device.born) return;
    device.born = false;
    await this.send('DDEATH', device.deviceId, ddeath(this.nextSeq(), this.clock()));
  }

  private async idleDeaths(): Promise<void> {
    if (!this.publishing) return;
    const before = this.clock() - this.o.settings.deviceIdleMs;
    for (const device of this.model.all()) if (device.born && device.lastAnswerAt <= before) await this.ddeath(device);
  }

  private async onMessage(link: LinkSession, topic: string, payload: Buffer): Promise<void> {
    const session = this.session;
    if (!session || session.link !== link) return;
    if (topic === this.topic('NCMD')) {
      if (!session.born || !asksRebirth(payload)) return;
      this.o.log.info({ bdSeq: session.bdSeq }, 'sparkplug: rebirth asked');
      return this.birth();
    }
    const online = this.host.accept(payload);
    if (online === true && !session.born) return this.birth();
    if (online === false && session.born) {
      // Sparkplug 3.0: the primary host went offline; end this session, and birth in a new
      // one (next bdSeq) once the host is back.
      this.o.log.warn({ bdSeq: session.bdSeq }, 'sparkplug: primary host offline: session ended');
      this.session = undefined;
      await link.end({ topic: this.topic('NDEATH'), payload: ndeath(session.bdSeq, this.clock()) });
      await this.o.state.setOpenSession(this.node, undefined);
      await this.openSession();
    }
  }

  private async onLost(link: LinkSession): Promise<void> {
    if (this.session?.link !== link) return;
    this.o.log.warn({ bdSeq: this.session.bdSeq }, 'sparkplug: connection lost: the broker sent the NDEATH; new session');
    this.session = undefined;
    this.later(() => this.openSession());
  }

  /** The lease is gone: not one more message; the broker (Will) or the next holder ends the session. */
  private async dropSession(): Promise<void> {
    const session = this.session;
    this.session = undefined;
    await session?.link.end(undefined);
  }
}
