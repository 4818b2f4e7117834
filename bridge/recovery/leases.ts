// Leases: every job this instance runs is leased to it in the store and renewed while its
// upstream call runs; a lease lost or about to run out stops the job before its next attempt.
import { performance } from 'node:perf_hooks';
import type { Logger } from '../logger.js';
import type { Store } from '../store/port.js';
import { storeFailed } from '../store/outage.js';
import type { ConditionReport } from '../repeating-log.js';

/**
 * A lease outlives one attempt by this much: the longest pause (GC, SIGSTOP, a VM freeze) a
 * lock holder survives without losing exclusivity (CONTRACT guarantee 6). Expiry + the reap
 * interval + a claim and a call must stay within CONTRACT guarantee 1's takeover bound,
 * UPSTREAM_TIMEOUT_MS + 5 s, counted from a kill right after a renewal.
 */
const LEASE_MARGIN_MS = 3000;

/** How long a claim leases a job: one whole attempt and the margin. */
export function leaseMsFor(upstreamTimeoutMs: number): number {
  return upstreamTimeoutMs + LEASE_MARGIN_MS;
}

/** A lease this instance holds, as renewal sees it (a running job). */
export interface HeldLease {
  readonly job: { readonly key: string };
  /** Monotonic time until which our lease surely holds. */
  leaseUntil: number;
  leaseLost: boolean;
}

/** Whether an attempt of `attemptMs` starting now could end outside the lease (or it is lost). */
export function leaseTooShort(lease: HeldLease, attemptMs: number): boolean {
  return lease.leaseLost || performance.now() + attemptMs >= lease.leaseUntil;
}

/** Renews the leases `held()` lists, all in one store call, until stopped. */
export class LeaseRenewal {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: Pick<Store, 'queue'>,
    private readonly owner: string,
    private readonly leaseMs: number,
    private readonly clock: () => number,
    private readonly logger: Logger,
    private readonly held: () => HeldLease[],
    /** The store out of reach: a renewal failing for it is summed up there. */
    private readonly outage: ConditionReport,
  ) {}

  start(): void {
    // Renewing every second keeps "no attempt starts unless it ends inside the lease" cheap to satisfy.
    this.timer = setInterval(() => void this.renew(), Math.min(1000, this.leaseMs / 4));
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async renew(): Promise<void> {
    const entries = this.held();
    if (entries.length === 0) {
      // Nothing left to renew: a renewal that failed no longer keeps the outage open.
      this.outage.ok('lease renewal');
      return;
    }
    const sentAt = performance.now();
    try {
      const held = await this.store.queue.renew(
        this.owner,
        entries.map((e) => e.job.key),
        this.leaseMs,
        this.clock(),
      );
      this.outage.ok('lease renewal');
      entries.forEach((entry, i) => {
        if (held[i]) entry.leaseUntil = sentAt + this.leaseMs;
        else entry.leaseLost = true;
      });
    } catch (err) {
      // Not renewed: leaseUntil stays as it was, so attempts stop once it is too close.
      storeFailed(this.outage, 'lease renewal', err, () => this.logger.warn({ err }, 'lease renewal failed'));
    }
  }
}
