// Metrics: one prom-client Registry per bridge instance (never the global default, so several
// in-process instances, as in tests, do not collide), served at /metrics, and the JSON snapshot
// published on bridge/{instanceId}/metrics.
//
// Hot path: every label combination known in advance (priority × outcome, lock grants…) is
// bound once at construction (observed.ts), so observing a request is an array/record
// lookup and an increment. Values owned elsewhere are read at scrape time (scraped.ts).
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import type { Priority, Reply } from '../../../contract/index.js';
import type { OverloadObserver, ShedReason } from '../../intake/overload.js';
import type { SchedulerObserver } from '../../scheduling/scheduler.js';
import type { QueueDepth } from '../../store/port.js';
import type { CircuitState } from '../../upstream/breaker.js';
import type { UpstreamResult } from '../../upstream/client.js';
import {
  CIRCUIT_VALUE,
  NO_PRIORITY,
  PREFIX,
  PRIORITY_LABELS,
  readQueueDepth,
  type Child,
  type HistogramChild,
  type MetricsSources,
  type Outcome,
  type PriorityLabel,
} from './common.js';
import { registerOverload, registerRequests, registerWork, type OverloadMetrics, type RequestMetrics, type WorkMetrics } from './observed.js';
import type { DashboardRecorder } from '../dashboard/recorder.js';
import { VERSION } from '../../version.js';
import { registerBrokerState, registerBudgetState, registerWorkState } from './scraped.js';

export { STORE_SCRAPE_TIMEOUT_MS, type MetricsSources } from './common.js';

export interface MetricsSnapshot {
  instance: string;
  at: string;
  intervalMs: number;
  /** null when the store did not answer within STORE_SCRAPE_TIMEOUT_MS. */
  queueDepth: QueueDepth | null;
  inFlight: number;
  /** Replies per second over the last interval. */
  rates: {
    requestsPerS: number;
    okPerS: number;
    cachedPerS: number;
    errorsPerS: number;
    byPriority: Record<PriorityLabel, number>;
  };
  upstream: Array<{ provider: string; circuit: CircuitState; state: number }>;
  connectedClients: number;
}

export class BridgeMetrics implements SchedulerObserver, OverloadObserver {
  readonly registry = new Registry();
  private readonly requests: RequestMetrics;
  private readonly overload: OverloadMetrics;
  private readonly work: WorkMetrics;
  private readonly upstreamLatencyChildren = new Map<string, HistogramChild>();
  private readonly usageChildren = new Map<string, { prompt: Child; completion: Child; cost: Child }>();
  private readonly templateChildren = new Map<string, { prompt: Child; completion: Child }>();
  private readonly budgetRefusals = new Counter({
    name: `${PREFIX}budget_refusals_total`,
    help: 'Requests answered budget_exceeded, by the budget that refused them',
    labelNames: ['budget'] as const,
    registers: [],
  });
  private readonly refusalRepliesDropped = new Counter({
    name: `${PREFIX}refusal_replies_dropped_total`,
    help: 'rate_limited refusals of devices over DEVICE_RATE_LIMIT_RPM dropped without a reply (at most one a second per device is sent)',
    registers: [],
  });

  // Plain counters for the snapshot's rates (reset each interval): index = PRIORITY_LABELS.
  private readonly intervalByPriority = new Array<number>(PRIORITY_LABELS.length).fill(0);
  private intervalOk = 0;
  private intervalCached = 0;
  private intervalErrors = 0;
  private intervalStart = Date.now();

  constructor(
    private readonly sources: MetricsSources,
    /** The operator dashboard's view of the same replies and claims. */
    private readonly dashboard?: DashboardRecorder,
  ) {
    // Registration order is the order of /metrics.
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    new Gauge({ name: `${PREFIX}build_info`, help: 'Always 1; the version label names the running version', labelNames: ['version'] as const, registers }).set(
      { version: VERSION },
      1,
    );
    this.requests = registerRequests(registers);
    this.overload = registerOverload(registers);
    this.work = registerWork(registers);
    registerWorkState(registers, sources);
    registerBrokerState(registers, sources);
    if (sources.budgets) registerBudgetState(registers, sources.budgets);
    this.registry.registerMetric(this.budgetRefusals);
    this.registry.registerMetric(this.refusalRepliesDropped);
  }

  budgetRefused(budget: string): void {
    this.budgetRefusals.labels(budget).inc();
  }

  refusalReplyDropped(): void {
    this.refusalRepliesDropped.inc();
  }

  /** Prometheus text exposition. */
  get contentType(): string {
    return this.registry.contentType;
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }

  /** Every reply a device gets passes here (Results' observer). */
  reply(reply: Reply, deviceId: string): void {
    this.dashboard?.reply(reply, deviceId);
    const priority: PriorityLabel = reply.priority ?? NO_PRIORITY;
    let outcome: Outcome;
    if (reply.ok) {
      outcome = reply.cached ? 'cached' : 'ok';
      if (reply.cached) this.intervalCached += 1;
      else this.intervalOk += 1;
    } else {
      outcome = reply.error.code;
      this.intervalErrors += 1;
    }
    this.requests.outcomes[priority][outcome].inc();
    this.intervalByPriority[PRIORITY_LABELS.indexOf(priority)]! += 1;
  }

  cacheHit(): void {
    this.work.cacheHits.inc();
  }

  // --- OverloadObserver ----------------------------------------------------------------

  shed(priority: Priority, reason: ShedReason): void {
    this.overload.shed[priority][reason].inc();
  }

  eventLoopDelay(ms: number): void {
    this.overload.loopDelay.set(ms / 1000);
  }

  // --- SchedulerObserver -------------------------------------------------------------

  claimed(priority: Priority, arrivalMs: number, locked: boolean, claimedAt: number): void {
    const waitMs = Math.max(0, claimedAt - arrivalMs);
    this.dashboard?.claimed(priority, waitMs);
    const waitS = waitMs / 1000;
    this.requests.queueWait[priority].observe(waitS);
    if (locked) {
      this.work.lockGrants.inc();
      this.work.lockWait.observe(waitS);
    }
  }

  answered(result: UpstreamResult): void {
    let child = this.upstreamLatencyChildren.get(result.provider);
    if (!child) {
      child = this.work.upstreamLatency.labels(result.provider);
      this.upstreamLatencyChildren.set(result.provider, child);
    }
    child.observe(result.upstreamMs / 1000);
  }

  coalescedAnswer(): void {
    this.work.coalesced.inc();
  }

  rateLimitWait(): void {
    this.work.rateLimitWaits.inc();
  }

  usage(model: string, promptTokens: number, completionTokens: number, costUsd: number, template?: string): void {
    if (template !== undefined) this.templateUsage(template, promptTokens, completionTokens);
    let children = this.usageChildren.get(model);
    if (!children) {
      children = {
        prompt: this.work.tokens.of(model, 'prompt'),
        completion: this.work.tokens.of(model, 'completion'),
        cost: this.work.cost.of(model),
      };
      this.usageChildren.set(model, children);
    }
    children.prompt.inc(promptTokens);
    children.completion.inc(completionTokens);
    if (costUsd > 0) children.cost.inc(costUsd);
  }

  private templateUsage(template: string, promptTokens: number, completionTokens: number): void {
    let children = this.templateChildren.get(template);
    if (!children) {
      children = { prompt: this.work.templateTokens.of(template, 'prompt'), completion: this.work.templateTokens.of(template, 'completion') };
      this.templateChildren.set(template, children);
    }
    children.prompt.inc(promptTokens);
    children.completion.inc(completionTokens);
  }

  // --- the bridge/{instanceId}/metrics snapshot ---------------------------------------

  /** The snapshot since the previous one (rates over that interval); starts a new interval. */
  async snapshot(instance: string): Promise<MetricsSnapshot> {
    const queueDepth = (await readQueueDepth(this.sources)) ?? null;
    const now = Date.now();
    const intervalMs = Math.max(1, now - this.intervalStart);
    const perS = (n: number): number => Math.round((n * 1000 * 1000) / intervalMs) / 1000;
    const byPriority = Object.fromEntries(PRIORITY_LABELS.map((p, i) => [p, perS(this.intervalByPriority[i] ?? 0)])) as Record<PriorityLabel, number>;
    const rates = {
      requestsPerS: perS(this.intervalOk + this.intervalCached + this.intervalErrors),
      okPerS: perS(this.intervalOk),
      cachedPerS: perS(this.intervalCached),
      errorsPerS: perS(this.intervalErrors),
      byPriority,
    };
    this.intervalStart = now;
    this.intervalOk = this.intervalCached = this.intervalErrors = 0;
    this.intervalByPriority.fill(0);
    return {
      instance,
      at: new Date(now).toISOString(),
      intervalMs,
      queueDepth,
      inFlight: this.sources.inFlight(),
      rates,
      upstream: this.sources.providers().map(({ name, circuit }) => ({ provider: name, circuit, state: CIRCUIT_VALUE[circuit] })),
      connectedClients: this.sources.connectedClients(),
    };
  }
}
