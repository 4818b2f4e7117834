// This instance's liveness lease on its sessions on the plant's broker (store/session-registry.ts):
// registered before the first connection, so a start of an INSTANCE_ID whose sessions another
// instance is adopting ends that adoption before it takes its sessions back; renewed while it
// runs; removed at a clean stop, after the connections closed (nothing is left to adopt).
import type { Logger } from '../logger.js';
import type { ConditionReport } from '../repeating-log.js';
import type { SessionRecord, SessionRegistry } from '../store/session-registry.js';

/** Renewals per lease: a lease survives a few missed renewals (a slow Redis, a long GC pause). */
const RENEWALS_PER_LEASE = 5;

export class Liveness {
  private timer: NodeJS.Timeout | undefined;
  private replacedLogged = false;
  private renewing = false;

  private constructor(
    private readonly registry: SessionRegistry,
    private readonly record: Omit<SessionRecord, 'generation'>,
    private readonly ttlMs: number,
    private readonly log: Logger,
    private readonly outage: ConditionReport,
    private generation: number,
  ) {}

  /** Registers this start and renews its lease until `leave`. */
  static async join(
    registry: SessionRegistry,
    record: Omit<SessionRecord, 'generation'>,
    ttlMs: number,
    log: Logger,
    outage: ConditionReport,
  ): Promise<Liveness> {
    const generation = await registry.join(record, ttlMs);
    const liveness = new Liveness(registry, record, ttlMs, log.child({ module: 'liveness' }), outage, generation);
    liveness.timer = setInterval(() => void liveness.renew(), Math.max(100, Math.floor(ttlMs / RENEWALS_PER_LEASE)));
    liveness.timer.unref();
    return liveness;
  }

  async leave(): Promise<void> {
    clearInterval(this.timer);
    await this.registry.leave(this.record.instanceId, this.generation).catch((err: unknown) => this.log.warn({ err }, 'could not remove the liveness lease'));
  }

  private async renew(): Promise<void> {
    const { instanceId } = this.record;
    if (this.renewing) return;
    this.renewing = true;
    try {
      const renewal = await this.registry.renew(instanceId, this.generation, this.ttlMs);
      this.outage.ok('liveness lease');
      if (renewal === 'gone') {
        // Taken for dead (a pause longer than the lease) and adopted: the connections come
        // back with fresh sessions and subscribe again by themselves; alive again.
        this.generation = await this.registry.join(this.record, this.ttlMs);
        this.log.warn({ instanceId }, 'this instance was taken for dead and its broker sessions adopted: lease registered again');
      } else if (renewal === 'replaced' && !this.replacedLogged) {
        this.replacedLogged = true;
        this.log.error({ instanceId }, 'another process started with this INSTANCE_ID: two instances share client ids on the broker');
      }
    } catch (err) {
      // Redis away (anything but a script's own error): part of the one outage report, not a line a second.
      if (err instanceof Error && err.name === 'ReplyError') this.log.warn({ err }, 'liveness lease renewal failed');
      else this.outage.fail('liveness lease', err);
    } finally {
      this.renewing = false;
    }
  }
}
