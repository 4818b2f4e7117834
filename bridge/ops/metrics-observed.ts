// The metrics the bridge observes on its hot path (replies, claims, shedding, upstream work),
// each label combination known in advance bound once, so observing is a lookup and an increment.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { PRIORITIES, type Priority } from '../../contract/index.js';
import type { ShedReason } from '../intake/overload.js';
import {
  LATENCY_BUCKETS,
  OUTCOMES,
  PREFIX,
  PRIORITY_LABELS,
  SHED_REASONS,
  WAIT_BUCKETS,
  type Child,
  type HistogramChild,
  type Outcome,
  type PriorityLabel,
} from './metrics-common.js';

export interface RequestMetrics {
  outcomes: Record<PriorityLabel, Record<Outcome, Child>>;
  queueWait: Record<Priority, HistogramChild>;
}

export function registerRequests(registers: Registry[]): RequestMetrics {
  const requests = new Counter({
    name: `${PREFIX}requests_total`,
    help: 'Replies sent to devices, by priority (none: no valid priority) and outcome (ok, cached, or the error code)',
    labelNames: ['priority', 'outcome'] as const,
    registers,
  });
  const queueWait = new Histogram({
    name: `${PREFIX}queue_wait_seconds`,
    help: 'Time from arrival to claim (queue and lock wait), by priority',
    labelNames: ['priority'] as const,
    buckets: WAIT_BUCKETS,
    registers,
  });
  return {
    outcomes: Object.fromEntries(
      PRIORITY_LABELS.map((p) => [p, Object.fromEntries(OUTCOMES.map((o) => [o, requests.labels(p, o)]))]),
    ) as Record<PriorityLabel, Record<Outcome, Child>>,
    queueWait: Object.fromEntries(PRIORITIES.map((p) => [p, queueWait.labels(p)])) as unknown as Record<Priority, HistogramChild>,
  };
}

export interface OverloadMetrics {
  shed: Record<Priority, Record<ShedReason, Child>>;
  loopDelay: Gauge;
}

export function registerOverload(registers: Registry[]): OverloadMetrics {
  const shed = new Counter({
    name: `${PREFIX}shed_total`,
    help: 'Requests answered queue_full by the overload guard before admission, by priority and reason (event_loop, admissions, queue_wait)',
    labelNames: ['priority', 'reason'] as const,
    registers,
  });
  const loopDelay = new Gauge({
    name: `${PREFIX}event_loop_delay_seconds`,
    help: 'Largest event-loop delay in the last overload window, compared with OVERLOAD_DELAY_MS (0 while the guard is off)',
    registers,
  });
  return {
    shed: Object.fromEntries(
      PRIORITIES.map((p) => [p, Object.fromEntries(SHED_REASONS.map((r) => [r, shed.labels(p, r)]))]),
    ) as Record<Priority, Record<ShedReason, Child>>,
    loopDelay,
  };
}

/** Upstream calls and what spared one (cache, coalescing), locks, rate budget, usage. */
export interface WorkMetrics {
  upstreamLatency: Histogram<'provider'>;
  cacheHits: Counter;
  coalesced: Counter;
  lockGrants: Counter;
  lockWait: Histogram;
  rateLimitWaits: Counter;
  tokens: Counter<'model' | 'kind'>;
  cost: Counter<'model'>;
}

export function registerWork(registers: Registry[]): WorkMetrics {
  return {
    upstreamLatency: new Histogram({
      name: `${PREFIX}upstream_latency_seconds`,
      help: 'Wall time of the successful upstream attempt, by provider',
      labelNames: ['provider'] as const,
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    cacheHits: new Counter({
      name: `${PREFIX}cache_hits_total`,
      help: 'Requests answered from the response cache at admission',
      registers,
    }),
    coalesced: new Counter({
      name: `${PREFIX}coalesced_total`,
      help: 'Requests answered by an identical request in flight (one shared upstream call)',
      registers,
    }),
    lockGrants: new Counter({
      name: `${PREFIX}lock_grants_total`,
      help: 'Jobs claimed holding their lock',
      registers,
    }),
    lockWait: new Histogram({
      name: `${PREFIX}lock_wait_seconds`,
      help: 'For jobs with a lock: time from arrival to the lock grant (includes queue wait)',
      buckets: WAIT_BUCKETS,
      registers,
    }),
    rateLimitWaits: new Counter({
      name: `${PREFIX}rate_limit_waits_total`,
      help: 'Upstream retries that had to wait for rate budget (RATE_LIMIT_RPM/TPM)',
      registers,
    }),
    tokens: new Counter({
      name: `${PREFIX}tokens_total`,
      help: 'Tokens the upstream reported, by model and kind (prompt, completion)',
      labelNames: ['model', 'kind'] as const,
      registers,
    }),
    cost: new Counter({
      name: `${PREFIX}cost_usd_total`,
      help: 'Estimated cost in USD (CONFIG_FILE prices), by model',
      labelNames: ['model'] as const,
      registers,
    }),
  };
}
