// The memory store's per-device quota and its QUEUE_MAX_BYTES count, as the Redis store keeps
// them in Lua (lua/includes/admission.lua, queue.lua).
import { storedSize } from './job-size.js';
import { SlidingWindow } from './sliding-window.js';
import type { AdmitLimits, QuotaCharge } from './port.js';
import type { Job } from '../model/job.js';

const MINUTE_MS = 60_000;

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
