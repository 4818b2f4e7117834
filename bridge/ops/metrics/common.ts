// What the metrics files share: the name prefix, the label values bound in advance, the
// buckets, and the sources read from the rest of the bridge at scrape (or snapshot) time.
import type { SessionStats } from '../../../broker/broker.js';
import { ERROR_CODES, PRIORITIES } from '../../../contract/index.js';
import type { ShedReason } from '../../intake/overload.js';
import type { BrokerRefusals } from '../../mqtt/port.js';
import type { QueueDepth } from '../../store/port.js';
import type { BudgetReport } from '../budgets-report.js';
import type { CircuitState } from '../../upstream/breaker.js';

export const PREFIX = 'edge_ai_bridge_';
/** A reply without a priority (unparseable request, unknown priority class). */
export const NO_PRIORITY = 'none';
export const PRIORITY_LABELS = [...PRIORITIES, NO_PRIORITY] as const;
export type PriorityLabel = (typeof PRIORITY_LABELS)[number];
export const OUTCOMES = ['ok', 'cached', ...ERROR_CODES] as const;
export type Outcome = (typeof OUTCOMES)[number];
export const SHED_REASONS: readonly ShedReason[] = ['event_loop', 'admissions', 'queue_wait'];

/** How long a scrape waits for the store's queue depth: a slow Redis must not hang /metrics. */
export const STORE_SCRAPE_TIMEOUT_MS = 1000;

/** Seconds: from a few ms (memory store, cache) to the upstream timeout range. */
export const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
export const WAIT_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 15, 30, 60, 300];

export const CIRCUIT_VALUE: Record<CircuitState, number> = { closed: 0, 'half-open': 1, open: 2 };

export type Child = { inc(value?: number): void };
export type HistogramChild = { observe(value: number): void };

export interface ScadaStats {
  answers: number;
  failures: number;
  dropped: number;
  /** Undefined while Sparkplug is off. */
  sparkplugPublishing?: boolean | undefined;
}

/** What the metrics read from the rest of the bridge at scrape (or snapshot) time. */
export interface MetricsSources {
  queueDepth(): Promise<QueueDepth>;
  inFlight(): number;
  providers(): Array<{ name: string; circuit: CircuitState }>;
  connectedClients(): number;
  refusals(): BrokerRefusals;
  /** The embedded broker's persistent sessions (undefined with BROKER_URL). */
  sessions?: (() => SessionStats | undefined) | undefined;
  /** Dead letters this instance dropped to keep the list within DLQ_MAX and DLQ_MAX_BYTES. */
  deadLettersDropped?: (() => number) | undefined;
  /** The SCADA outputs' counts and the Sparkplug Edge Node's state (undefined while both are off). */
  scada?: (() => ScadaStats | undefined) | undefined;
  /** The CONFIG_FILE budgets' use in their current periods (none configured: no series). */
  budgets?: (() => Promise<BudgetReport>) | undefined;
}

/** The store's queue depth, or undefined when it failed or took over STORE_SCRAPE_TIMEOUT_MS. */
export function readQueueDepth(sources: MetricsSources): Promise<QueueDepth | undefined> {
  return withTimeout(sources.queueDepth(), STORE_SCRAPE_TIMEOUT_MS, 'queue depth').catch(() => undefined);
}

/** Rejects after `ms` (the timer never keeps the process alive). */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
