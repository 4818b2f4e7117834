// The survivors' side of the plant's broker (BROKER_URL) with Redis: an instance whose liveness
// lease lapsed (kill -9, a host gone) leaves its persistent sessions in the broker, and the broker
// keeps queuing its share of the requests there. Every instance looks for such a lease; the one
// that claims it (store/session-registry.ts: one claim per death, fenced) adopts every session of
// the dead instance (mqtt/adopt-session.ts) and, once all are drained and ended, removes its
// record. A claim lost (the instance renewed or started again), a session taken over by the
// instance itself, or a connection lost, keeps the record: the instance has it back, or the next
// look adopts what is left.
import type { Logger } from '../logger.js';
import type { AdoptedSession } from '../mqtt/adopt-session.js';
import type { AdoptionClaim, SessionRecord, SessionRegistry } from '../store/session-registry.js';

/** Looks and claim renewals per lease. */
const CHECKS_PER_LEASE = 5;

export interface AdoptionDeps {
  registry: SessionRegistry;
  /** This instance's id: never adopts itself. */
  instanceId: string;
  /** This process (identity.owner): the claim names it. */
  owner: string;
  /** BROKER_SHARE_GROUP: only instances of the same group are adopted. */
  group: string;
  /** BROKER_ADOPT_AFTER_MS: the liveness lease, and the claim's. */
  leaseMs: number;
  /** Adopts one session of `record` (connects as `clientId`). */
  adopt(record: SessionRecord, clientId: string, stillOurs: () => Promise<boolean>, signal: AbortSignal): Promise<AdoptedSession>;
  log: Logger;
}

export class Adoption {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private readonly stopping = new AbortController();
  private readonly log: Logger;
  /** Until when nothing is adopted: after Redis was out of reach, every lease may have lapsed at once. */
  private holdOffUntil = 0;
  /** Records whose adoption failed (refused, lost): logged at warn once per generation. */
  private readonly warned = new Set<string>();

  constructor(private readonly deps: AdoptionDeps) {
    this.log = deps.log.child({ module: 'adoption' });
  }

  start(): void {
    this.timer = setInterval(() => {
      this.running ??= this.look().finally(() => (this.running = undefined));
    }, this.interval());
  }

  /** Stops looking; an adoption under way keeps its sessions (another instance adopts them). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.stopping.abort();
    await this.running;
  }

  private interval(): number {
    return Math.max(100, Math.floor(this.deps.leaseMs / CHECKS_PER_LEASE));
  }

  private async look(): Promise<void> {
    const { registry, instanceId, group } = this.deps;
    if (Date.now() < this.holdOffUntil) return;
    let lapsed: SessionRecord[];
    try {
      lapsed = (await registry.lapsed()).filter((r) => r.instanceId !== instanceId && r.group === group);
    } catch (err) {
      // The live instances get one lease to renew theirs once Redis is back.
      this.holdOffUntil = Date.now() + this.deps.leaseMs;
      this.log.debug({ err }, "could not read the instances' liveness leases");
      return;
    }
    for (const record of lapsed) {
      if (this.stopping.signal.aborted) return;
      const claim = await registry.claim(record, this.deps.owner, this.deps.leaseMs).catch(() => undefined);
      if (claim) await this.adopt(record, claim);
    }
  }

  private async adopt(record: SessionRecord, claim: AdoptionClaim): Promise<void> {
    const { registry, leaseMs } = this.deps;
    const dead = record.instanceId;
    const startedAt = Date.now();
    this.log.warn({ dead, clientIds: record.clientIds }, 'instance lease lapsed: adopting its broker sessions');
    const lost = new AbortController();
    const signal = AbortSignal.any([lost.signal, this.stopping.signal]);
    let held = true;
    const stillOurs = async (): Promise<boolean> => (held &&= await registry.hold(claim, leaseMs));
    const holding = setInterval(() => {
      stillOurs().then(
        (ours) => ours || lost.abort(),
        (err: unknown) => this.log.debug({ err }, 'could not renew the adoption claim'),
      );
    }, this.interval());
    let sessions: AdoptedSession[];
    try {
      sessions = await Promise.all(record.clientIds.map((clientId) => this.deps.adopt(record, clientId, stillOurs, signal)));
    } finally {
      clearInterval(holding);
    }
    const adopted = sessions.every((s) => s.outcome === 'ended');
    // Not ours any more: the instance started again or renewed its lease (the claim is gone).
    const back = !adopted && !(await stillOurs().catch(() => true));
    await registry.release(claim, adopted).catch((err: unknown) => this.log.warn({ err, dead }, 'could not end the adoption claim'));
    this.report(record, sessions, { adopted, back }, Date.now() - startedAt);
  }

  private report(record: SessionRecord, sessions: AdoptedSession[], { adopted, back }: { adopted: boolean; back: boolean }, tookMs: number): void {
    const dead = record.instanceId;
    const received = sessions.reduce((n, s) => n + s.received, 0);
    const outcomes = Object.fromEntries(record.clientIds.map((id, i) => [id, sessions[i]?.outcome]));
    const fields = { dead, received, outcomes, tookMs };
    if (adopted) {
      this.log.warn(fields, 'adopted the broker sessions of a dead instance: its queued requests admitted, its sessions ended');
    } else if (back) {
      this.log.info(fields, 'adoption ended: the instance is back (started again, or renewed its lease) and has its sessions');
    } else if (this.warned.has(`${dead}|${record.generation}`)) {
      this.log.debug(fields, 'adoption not finished: tried again while the lease stays lapsed');
    } else {
      this.warned.add(`${dead}|${record.generation}`);
      this.log.warn(fields, 'adoption not finished (refused, connection lost, or the claim lost): tried again while the lease stays lapsed');
    }
  }
}
