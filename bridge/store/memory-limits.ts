// The memory store's limits: the per-device quota, the upstream's rate (RPM, TPM, a 429's
// pause), budget reservations, and the QUEUE_MAX_BYTES count, as the Redis store keeps them in
// Lua (lua/includes/admission.lua, queue.lua).
import type { BudgetCharge } from '../model/budget-charge.js';
import type { Job } from '../model/job.js';
import { MemorySpend } from './budget-spend.js';
import { storedSize } from './job-size.js';
import { SlidingWindow } from './sliding-window.js';
import type { AdmitLimits, Limits, QuotaCharge, RateTake } from './port.js';

const MINUTE_MS = 60_000;
/** Admissions between two sweeps of what idle devices and expired answers left behind. */
const SWEEP_EVERY = 4096;

export class MemoryLimits implements Limits {
  readonly spend = new MemorySpend();
  private readonly quota = new DeviceQuota();
  private readonly calls = new SlidingWindow(MINUTE_MS);
  private admissions = 0;
  /** Until when a 429 paused every call to the upstream. */
  pausedUntil = 0;

  /** `sweepOthers`: the rest of the store's sweep, run with this quota's every SWEEP_EVERY publishes counted, so a long run does not grow without bound. */
  constructor(private readonly sweepOthers: (now: number) => void) {}

  async chargeQuota(deviceId: string, rpm: number, now: number): Promise<QuotaCharge> {
    if (++this.admissions % SWEEP_EVERY === 0) {
      this.quota.sweep(now);
      this.sweepOthers(now);
    }
    return this.quota.charge(deviceId, rpm, now);
  }

  async takeRate(tokens: number, rpm: number, tpm: number | undefined, now: number): Promise<RateTake> {
    if (this.pausedUntil > now) return { ok: false, retryAtMs: this.pausedUntil };
    return this.tryTake(tokens, rpm, tpm, now);
  }

  async settleTokens(callId: string, tokens: number): Promise<void> {
    this.calls.setWeight(Number(callId), tokens);
  }

  async pauseUpstream(untilMs: number): Promise<void> {
    this.pausedUntil = Math.max(this.pausedUntil, untilMs);
  }

  async settleBudgets(settled: Array<{ charge: BudgetCharge; used: number }>): Promise<void> {
    this.spend.settle(settled);
  }

  /** One upstream call's rate token, if RPM and TPM have room (a claim's, without the pause). */
  tryTake(tokens: number, rpm: number, tpm: number | undefined, now: number): RateTake {
    const rpmFree = this.calls.count(now) < rpm;
    const tpmFree = tpm === undefined || this.calls.weight(now) + tokens <= tpm || this.calls.count(now) === 0;
    if (rpmFree && tpmFree) {
      return { ok: true, callId: String(this.calls.add(now, tokens)) };
    }
    const rpmAt = rpmFree ? now : this.calls.freeAt(rpm, now);
    const tpmAt = tpmFree || tpm === undefined ? now : this.calls.weightFreeAt(tpm - tokens, now);
    return { ok: false, retryAtMs: Math.max(rpmAt, tpmAt) };
  }
}

/** Every publish of a device in its rolling minute; windows of devices idle for a minute are swept. */
export class DeviceQuota {
  private readonly windows = new Map<string, SlidingWindow>();

  /** Counts one publish, unless the device is over `rpm` (then nothing is counted). */
  charge(deviceId: string, rpm: number, now: number): QuotaCharge {
    let window = this.windows.get(deviceId);
    if (!window) this.windows.set(deviceId, (window = new SlidingWindow(MINUTE_MS)));
    if (window.count(now) >= rpm) return { ok: false, retryAfterMs: window.freeAt(rpm, now) - now };
    window.add(now, 1);
    return { ok: true };
  }

  sweep(now: number): void {
    for (const [deviceId, window] of this.windows) if (window.count(now) === 0) this.windows.delete(deviceId);
  }
}

/** The stored size of every job admitted and not yet answered, drained or handed out for its last reply. */
export class QueueBytes {
  private readonly sizes = new Map<string, number>();
  private total = 0;

  get bytes(): number {
    return this.total;
  }

  /** The size of `job` when it fits under the limit, else undefined. */
  fits(job: Job, limits: AdmitLimits): number | undefined {
    const size = storedSize(job);
    return limits.queueMaxBytes !== undefined && this.total + size > limits.queueMaxBytes ? undefined : size;
  }

  add(key: string, size: number): void {
    this.sizes.set(key, size);
    this.total += size;
  }

  forget(key: string): void {
    this.total -= this.sizes.get(key) ?? 0;
    this.sizes.delete(key);
  }
}
