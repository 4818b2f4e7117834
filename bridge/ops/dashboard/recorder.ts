// What this instance saw since the dashboard's last tick: replies by priority and outcome,
// queue wait and end-to-end latency histograms by priority; and each device's last replies,
// for the device search. Fed from the metrics observers (every reply, every claim).
import { PRIORITIES, type Priority, type Reply } from '../../../contract/index.js';
import { newHistogram, recordMs, type Histogram } from './histogram.js';
import type { RecentRequest } from './model.js';

/** Replies kept per device, and devices kept (the least recently answered go first). */
const RECENT_PER_DEVICE = 20;
const RECENT_DEVICES = 10_000;

export interface TickCounts {
  /** Epoch ms the counts started. */
  since: number;
  replies: Record<Priority, number>;
  outcomes: Record<string, number>;
  wait: Record<Priority, Histogram>;
  e2e: Record<Priority, Histogram>;
}

const byPriority = <T>(make: () => T): Record<Priority, T> => Object.fromEntries(PRIORITIES.map((p) => [p, make()])) as Record<Priority, T>;

function newCounts(since: number): TickCounts {
  return { since, replies: byPriority(() => 0), outcomes: {}, wait: byPriority(newHistogram), e2e: byPriority(newHistogram) };
}

export class DashboardRecorder {
  private counts: TickCounts;
  /** deviceId → its last replies, oldest first; Map order = least recently answered first. */
  private readonly recent = new Map<string, RecentRequest[]>();

  constructor(
    private readonly instance: string,
    private readonly clock: () => number = Date.now,
  ) {
    this.counts = newCounts(clock());
  }

  reply(reply: Reply, deviceId: string): void {
    const outcome = reply.ok ? (reply.cached ? 'cached' : 'ok') : reply.error.code;
    const c = this.counts;
    c.outcomes[outcome] = (c.outcomes[outcome] ?? 0) + 1;
    const priority = reply.priority ?? null;
    const latencyMs = reply.ok ? reply.timing.total_ms : null;
    if (priority !== null) {
      c.replies[priority] += 1;
      if (latencyMs !== null) recordMs(c.e2e[priority], latencyMs);
    }
    this.remember(deviceId, { id: reply.id ?? '', priority, outcome, latencyMs, at: this.clock(), instance: this.instance });
  }

  claimed(priority: Priority, waitMs: number): void {
    recordMs(this.counts.wait[priority], waitMs);
  }

  /** The counts since the last take; new ones start now. */
  take(): TickCounts {
    const taken = this.counts;
    this.counts = newCounts(this.clock());
    return taken;
  }

  /** Devices whose id contains `query` (case-insensitive), the last answered first, with their last replies, newest first. */
  recentOf(query: string, limit: number): Array<{ deviceId: string; recent: RecentRequest[] }> {
    const q = query.toLowerCase();
    const found: Array<{ deviceId: string; recent: RecentRequest[] }> = [];
    for (const [deviceId, list] of [...this.recent].reverse()) {
      if (found.length >= limit) break;
      if (deviceId.toLowerCase().includes(q)) found.push({ deviceId, recent: [...list].reverse() });
    }
    return found;
  }

  private remember(deviceId: string, entry: RecentRequest): void {
    let list = this.recent.get(deviceId);
    if (list) this.recent.delete(deviceId);
    else list = [];
    list.push(entry);
    if (list.length > RECENT_PER_DEVICE) list.shift();
    this.recent.set(deviceId, list);
    if (this.recent.size > RECENT_DEVICES) this.recent.delete(this.recent.keys().next().value as string);
  }
}
