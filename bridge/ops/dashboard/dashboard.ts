// The operator dashboard's server side: every tick this instance reports what it saw to the
// store, reads every live instance's report back, and turns them into one fleet point (kept
// 15 minutes) and the tables the page shows, sent to each open page as a server-sent event.
// Every instance ticks whether or not a page is open, so any page sees the whole fleet.
import type { Logger } from '../../logger.js';
import type { InstanceReports } from '../../store/instance-reports.js';
import type { QueueDepth, Store } from '../../store/port.js';
import type { ProviderChain } from '../../upstream/chain.js';
import type { ReadinessState } from '../readiness.js';
import { buildReport, fleetView, type InstanceReport } from './fleet.js';
import type { HistoryEvent, InstanceView, Point, TickEvent } from './model.js';
import type { DashboardRecorder } from './recorder.js';

export const DEFAULT_TICK_MS = 2000;
const HISTORY_MS = 15 * 60_000;
/** A report counts for this many ticks: an instance that stops reporting leaves the fleet then. */
const LIVE_TICKS = 3;
/** A tick's store calls give up after this long: a stalled Redis must not stop the page. */
const STORE_TIMEOUT_MS = 1000;

export interface DashboardSources {
  instance: string;
  version: string;
  startedAt: number;
  store: Pick<Store, 'operations'>;
  reports: InstanceReports;
  recorder: DashboardRecorder;
  upstream: Pick<ProviderChain, 'health' | 'takeAttemptStats'>;
  readiness(): ReadinessState;
  inFlight(): number;
  connectedClients(): number;
  tickMs: number;
  logger: Logger;
  clock?: () => number;
}

export type DashboardEvent = { name: 'tick'; data: TickEvent };

export class Dashboard {
  private readonly points: Point[] = [];
  private readonly listeners = new Set<(event: DashboardEvent) => void>();
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;
  private last: TickEvent | undefined;
  private readonly clock: () => number;

  constructor(private readonly sources: DashboardSources) {
    this.clock = sources.clock ?? Date.now;
  }

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.sources.tickMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.listeners.clear();
  }

  /** The points before the latest tick's, which follows the history at once (openEvents). */
  history(): HistoryEvent {
    return { tickMs: this.sources.tickMs, points: this.points.slice(0, -1) };
  }

  /** The last tick's event, so a page that opens between ticks has its tables at once. */
  latest(): TickEvent | undefined {
    return this.last;
  }

  /** Event streams open now (one listener each). */
  get streams(): number {
    return this.listeners.size;
  }

  /** Calls `listener` with every tick's event until the returned function is called. */
  subscribe(listener: (event: DashboardEvent) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  /** One tick: report, read the fleet back, keep the point, tell the pages. Exposed for tests. */
  async tick(): Promise<void> {
    if (this.ticking) return; // a slow store: skip a beat rather than pile up
    this.ticking = true;
    try {
      const event = await this.fleetTick();
      this.last = event;
      this.points.push(event.point);
      while (this.points.length > 0 && (this.points[0]?.t ?? 0) < event.point.t - HISTORY_MS) this.points.shift();
      for (const listener of this.listeners) listener({ name: 'tick', data: event });
    } catch (err) {
      this.sources.logger.warn({ err }, 'dashboard tick failed');
    } finally {
      this.ticking = false;
    }
  }

  private async fleetTick(): Promise<TickEvent> {
    const { recorder, upstream, reports, store, instance, tickMs } = this.sources;
    const now = this.clock();
    const report = buildReport(this.instanceView(now), recorder.take(), upstream.health(), upstream.takeAttemptStats());
    const ttlMs = tickMs * LIVE_TICKS;
    const [live, depth, deadLetters] = await Promise.all([
      orNull(reports.put(instance, JSON.stringify(report), ttlMs, now).then(() => reports.live(now))),
      orNull<QueueDepth>(store.operations.queueDepth()),
      orNull(store.operations.deadLetters.stats(now).then((s) => s.count)),
    ]);
    // Without the store this instance still shows itself.
    const fleet = live === null ? [report] : live.map((text) => JSON.parse(text) as InstanceReport);
    return { ...fleetView(fleet, depth, now, report.intervalMs / 1000), deadLetters: deadLetters ?? 0 };
  }

  private instanceView(now: number): InstanceView {
    const { readiness, instance, version, startedAt } = this.sources;
    const state = readiness();
    return {
      instance,
      version,
      startedAt,
      broker: state.broker,
      store: state.store,
      connectedClients: this.sources.connectedClients(),
      inFlight: this.sources.inFlight(),
      storeReachable: state.storeReachable,
      ready: state.ready,
      notReady: notReadyReasons(state),
      seenAt: now,
    };
  }
}

function notReadyReasons(state: ReadinessState): string[] {
  const reasons: string[] = [];
  if (!state.listening) reasons.push('stopping');
  if (!state.storeReachable) reasons.push('store unreachable');
  if (!state.providers.some((p) => p.available)) reasons.push('no upstream provider available');
  if (!state.brokerConnected) reasons.push('broker not connected');
  return reasons;
}

/** The value, or null when it failed or took longer than STORE_TIMEOUT_MS. */
async function orNull<T>(promise: Promise<T>): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), STORE_TIMEOUT_MS);
  });
  try {
    return await Promise.race([promise.catch(() => null), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
