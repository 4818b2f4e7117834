// The metrics the bridge observes on its hot path (replies, claims, shedding, upstream work),
// each label combination known in advance bound once, so observing is a lookup and an increment
// (per request, through fast.ts: tallies handed to prom-client at scrape, array histograms).
import { Counter, Gauge, type Registry } from 'prom-client';
import { PRIORITIES, type Priority } from '../../../contract/index.js';
import type { ShedReason } from '../../intake/overload.js';
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
} from './common.js';
import { BucketHistogram, Tallies } from './fast.js';

export interface RequestMetrics {
  outcomes: Record<PriorityLabel, Record<Outcome, Child>>;
  queueWait: Record<Priority, HistogramChild>;
}

export function registerRequests(registers: Registry[]): RequestMetrics {
  const tallies: Tallies<'priority' | 'outcome'> = new Tallies(() => requests);
  const requests = new Counter({
    name: `${PREFIX}requests_total`,
    help: 'Replies sent to devices, by priority (none: no valid priority) and outcome (ok, cached, or the error code)',
    labelNames: ['priority', 'outcome'] as const,
    registers,
    collect: () => tallies.flush(),
  });
  const queueWait = new BucketHistogram({
    name: `${PREFIX}queue_wait_seconds`,
    help: 'Time from arrival to claim (queue and lock wait), by priority',
    labelNames: ['priority'],
    buckets: WAIT_BUCKETS,
    registers,
  });
  return {
    outcomes: Object.fromEntries(PRIORITY_LABELS.map((p) => [p, Object.fromEntries(OUTCOMES.map((o) => [o, tallies.of(p, o)]))])) as unknown as Record<
      PriorityLabel,
      Record<Outcome, Child>
    >,
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
    shed: Object.fromEntries(PRIORITIES.map((p) => [p, Object.fromEntries(SHED_REASONS.map((r) => [r, shed.labels(p, r)]))])) as Record<
      Priority,
      Record<ShedReason, Child>
    >,
    loopDelay,
  };
}

/** Upstream calls and what spared one (cache, coalescing), locks, rate budget, usage. */
export interface WorkMetrics {
  upstreamLatency: BucketHistogram;
  cacheHits: Counter;
  coalesced: Counter;
  lockGrants: Counter;
  lockWait: BucketHistogram;
  rateLimitWaits: Counter;
  /** Tallies of `edge_ai_bridge_tokens_total` (model, kind) and `cost_usd_total` (model). */
  tokens: Tallies<'model' | 'kind'>;
  cost: Tallies<'model'>;
  /** `edge_ai_bridge_template_tokens_total` (template, kind): requests rendered from a CONFIG_FILE template. */
  templateTokens: Tallies<'template' | 'kind'>;
}

export function registerWork(registers: Registry[]): WorkMetrics {
  const tokens: Tallies<'model' | 'kind'> = new Tallies(() => tokensTotal);
  const cost: Tallies<'model'> = new Tallies(() => costTotal);
  const templateTokens: Tallies<'template' | 'kind'> = new Tallies(() => templateTokensTotal);
  const templateTokensTotal = new Counter({
    name: `${PREFIX}template_tokens_total`,
    help: 'Tokens the upstream reported for requests rendered from a CONFIG_FILE template, by template and kind',
    labelNames: ['template', 'kind'] as const,
    registers: [],
    collect: () => templateTokens.flush(),
  });
  const tokensTotal = new Counter({
    name: `${PREFIX}tokens_total`,
    help: 'Tokens the upstream reported, by model and kind (prompt, completion)',
    labelNames: ['model', 'kind'] as const,
    registers: [],
    collect: () => tokens.flush(),
  });
  const costTotal = new Counter({
    name: `${PREFIX}cost_usd_total`,
    help: 'Estimated cost in USD (CONFIG_FILE prices), by model',
    labelNames: ['model'] as const,
    registers: [],
    collect: () => cost.flush(),
  });
  const work: WorkMetrics = {
    upstreamLatency: new BucketHistogram({
      name: `${PREFIX}upstream_latency_seconds`,
      help: 'Wall time of the successful upstream attempt, by provider',
      labelNames: ['provider'],
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
    lockWait: new BucketHistogram({
      name: `${PREFIX}lock_wait_seconds`,
      help: 'For jobs with a lock: time from arrival to the lock grant (includes queue wait)',
      labelNames: [],
      buckets: WAIT_BUCKETS,
      registers,
    }),
    rateLimitWaits: new Counter({
      name: `${PREFIX}rate_limit_waits_total`,
      help: 'Upstream retries that had to wait for rate budget (RATE_LIMIT_RPM/TPM)',
      registers,
    }),
    tokens,
    cost,
    templateTokens,
  };
  // Last, where they always were in /metrics.
  for (const registry of registers) {
    registry.registerMetric(tokensTotal);
    registry.registerMetric(costTotal);
    registry.registerMetric(templateTokensTotal);
  }
  return work;
}
