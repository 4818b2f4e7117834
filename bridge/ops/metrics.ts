// Metrics: one prom-client Registry per bridge instance (never the global default, so several
// in-process instances, as in tests, do not collide), served at /metrics, and the JSON snapshot
// published on bridge/{instanceId}/metrics.
//
// Hot path: every label combination known in advance (priority × outcome, lock grants…) is
// bound once here, so observing a request is an array/record lookup and an increment. Values
// owned elsewhere (queue depth in the store, in-flight count, circuit states, connected
// clients, broker refusals) are read at scrape time through `collect`.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { ERROR_CODES, PRIORITIES, type Priority, type Reply } from '../../contract/index.js';
import type { OverloadObserver, ShedReason } from '../intake/overload.js';
import type { SchedulerObserver } from '../scheduling/scheduler.js';
import type { QueueDepth } from '../store/types.js';
import type { CircuitState } from '../upstream/breaker.js';
import type { UpstreamResult } from '../upstream/client.js';

const PREFIX = 'edge_ai_bridge_';
/** A reply without a priority (unparseable request, unknown priority class). */
const NO_PRIORITY = 'none';
const PRIORITY_LABELS = [...PRIORITIES, NO_PRIORITY] as const;
type PriorityLabel = (typeof PRIORITY_LABELS)[number];
const OUTCOMES = ['ok', 'cached', ...ERROR_CODES] as const;
type Outcome = (typeof OUTCOMES)[number];

/** How long a scrape waits for the store's queue depth: a slow Redis must not hang /metrics. */
export const STORE_SCRAPE_TIMEOUT_MS = 1000;

/** Seconds: from a few ms (memory store, cache) to the upstream timeout range. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const WAIT_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 15, 30, 60, 300];

export const CIRCUIT_VALUE: Record<CircuitState, number> = { closed: 0, 'half-open': 1, open: 2 };

/** What the metrics read from the rest of the bridge at scrape (or snapshot) time. */
export interface MetricsSources {
  queueDepth(): Promise<QueueDepth>;
  inFlight(): number;
  providers(): Array<{ name: string; circuit: CircuitState }>;
  connectedClients(): number;
  refusals(): { publish: number; subscribe: number; connect: number };
}

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

type Child = { inc(value?: number): void };
type HistogramChild = { observe(value: number): void };

const SHED_REASONS: readonly ShedReason[] = ['event_loop', 'admissions', 'queue_wait'];

export class BridgeMetrics implements SchedulerObserver, OverloadObserver {
  readonly registry = new Registry();
  private readonly requestChildren: Record<PriorityLabel, Record<Outcome, Child>>;
  private readonly queueWaitChildren: Record<Priority, HistogramChild>;
  private readonly shedChildren: Record<Priority, Record<ShedReason, Child>>;
  private readonly loopDelay: Gauge;
  private readonly cacheHits: Counter;
  private readonly coalesced: Counter;
  private readonly lockGrants: Counter;
  private readonly lockWait: Histogram;
  private readonly rateLimitWaits: Counter;
  private readonly upstreamLatency: Histogram<'provider'>;
  private readonly upstreamLatencyChildren = new Map<string, HistogramChild>();
  private readonly tokens: Counter<'model' | 'kind'>;
  private readonly cost: Counter<'model'>;
  private readonly usageChildren = new Map<string, { prompt: Child; completion: Child; cost: Child }>();

  // Plain counters for the snapshot's rates (reset each interval): index = PRIORITY_LABELS.
  private readonly intervalByPriority = new Array<number>(PRIORITY_LABELS.length).fill(0);
  private intervalOk = 0;
  private intervalCached = 0;
  private intervalErrors = 0;
  private intervalStart = Date.now();

  constructor(private readonly sources: MetricsSources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });

    const requests = new Counter({
      name: `${PREFIX}requests_total`,
      help: 'Replies sent to devices, by priority (none: no valid priority) and outcome (ok, cached, or the error code)',
      labelNames: ['priority', 'outcome'] as const,
      registers,
    });
    this.requestChildren = Object.fromEntries(
      PRIORITY_LABELS.map((p) => [p, Object.fromEntries(OUTCOMES.map((o) => [o, requests.labels(p, o)]))]),
    ) as Record<PriorityLabel, Record<Outcome, Child>>;

    const queueWait = new Histogram({
      name: `${PREFIX}queue_wait_seconds`,
      help: 'Time from arrival to claim (queue and lock wait), by priority',
      labelNames: ['priority'] as const,
      buckets: WAIT_BUCKETS,
      registers,
    });
    this.queueWaitChildren = Object.fromEntries(PRIORITIES.map((p) => [p, queueWait.labels(p)])) as unknown as Record<
      Priority,
      HistogramChild
    >;

    const shed = new Counter({
      name: `${PREFIX}shed_total`,
      help: 'Requests answered queue_full by the overload guard before admission, by priority and reason (event_loop, admissions, queue_wait)',
      labelNames: ['priority', 'reason'] as const,
      registers,
    });
    this.shedChildren = Object.fromEntries(
      PRIORITIES.map((p) => [p, Object.fromEntries(SHED_REASONS.map((r) => [r, shed.labels(p, r)]))]),
    ) as Record<Priority, Record<ShedReason, Child>>;
    this.loopDelay = new Gauge({
      name: `${PREFIX}event_loop_delay_seconds`,
      help: 'Largest event-loop delay in the last overload window, compared with OVERLOAD_DELAY_MS (0 while the guard is off)',
      registers,
    });

    this.upstreamLatency = new Histogram({
      name: `${PREFIX}upstream_latency_seconds`,
      help: 'Wall time of the successful upstream attempt, by provider',
      labelNames: ['provider'] as const,
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.cacheHits = new Counter({
      name: `${PREFIX}cache_hits_total`,
      help: 'Requests answered from the response cache at admission',
      registers,
    });
    this.coalesced = new Counter({
      name: `${PREFIX}coalesced_total`,
      help: 'Requests answered by an identical request in flight (one shared upstream call)',
      registers,
    });
    this.lockGrants = new Counter({
      name: `${PREFIX}lock_grants_total`,
      help: 'Jobs claimed holding their lock',
      registers,
    });
    this.lockWait = new Histogram({
      name: `${PREFIX}lock_wait_seconds`,
      help: 'For jobs with a lock: time from arrival to the lock grant (includes queue wait)',
      buckets: WAIT_BUCKETS,
      registers,
    });
    this.rateLimitWaits = new Counter({
      name: `${PREFIX}rate_limit_waits_total`,
      help: 'Upstream retries that had to wait for rate budget (RATE_LIMIT_RPM/TPM)',
      registers,
    });
    this.tokens = new Counter({
      name: `${PREFIX}tokens_total`,
      help: 'Tokens the upstream reported, by model and kind (prompt, completion)',
      labelNames: ['model', 'kind'] as const,
      registers,
    });
    this.cost = new Counter({
      name: `${PREFIX}cost_usd_total`,
      help: 'Estimated cost in USD (CONFIG_FILE prices), by model',
      labelNames: ['model'] as const,
      registers,
    });

    // Read at scrape time.
    let depthRead: Promise<QueueDepth | undefined> | undefined;
    const depthOfScrape = (): Promise<QueueDepth | undefined> => {
      depthRead ??= readQueueDepth(sources).finally(() => {
        depthRead = undefined;
      });
      return depthRead;
    };
    // Both read the one queue-depth read of a scrape (prom-client collects every metric at once).
    new Counter({
      name: `${PREFIX}queue_depth_scrape_failures_total`,
      help: 'Scrapes whose queue depth read failed or timed out',
      registers,
      async collect() {
        if ((await depthOfScrape()) === undefined) this.inc();
      },
    });
    new Gauge({
      name: `${PREFIX}queue_depth`,
      help: `Queued requests by priority (fleet-wide with Redis); absent when the store did not answer within ${STORE_SCRAPE_TIMEOUT_MS} ms`,
      labelNames: ['priority'] as const,
      registers,
      async collect() {
        const depth = await depthOfScrape();
        this.reset();
        if (!depth) return;
        for (const p of PRIORITIES) this.set({ priority: p }, depth[p]);
      },
    });
    new Gauge({
      name: `${PREFIX}in_flight`,
      help: 'Jobs this instance holds (upstream calls running or waiting on an identical one)',
      registers,
      collect() {
        this.set(sources.inFlight());
      },
    });
    new Gauge({
      name: `${PREFIX}circuit_state`,
      help: 'Circuit breaker state per provider as this instance last saw it: 0 closed, 1 half-open, 2 open',
      labelNames: ['provider'] as const,
      registers,
      collect() {
        this.reset();
        for (const { name, circuit } of sources.providers()) this.set({ provider: name }, CIRCUIT_VALUE[circuit]);
      },
    });
    new Gauge({
      name: `${PREFIX}connected_clients`,
      help: 'MQTT clients connected to this instance',
      registers,
      collect() {
        this.set(sources.connectedClients());
      },
    });
    new Counter({
      name: `${PREFIX}auth_refusals_total`,
      help: 'Connections refused at CONNECT (credentials, client id, will topic, MAX_CONNECTIONS)',
      registers,
      collect() {
        this.reset();
        this.inc(sources.refusals().connect);
      },
    });
    new Counter({
      name: `${PREFIX}acl_refusals_total`,
      help: 'Publishes and subscriptions refused by the topic access rules',
      labelNames: ['action'] as const,
      registers,
      collect() {
        const { publish, subscribe } = sources.refusals();
        this.reset();
        this.inc({ action: 'publish' }, publish);
        this.inc({ action: 'subscribe' }, subscribe);
      },
    });
  }

  /** Prometheus text exposition. */
  get contentType(): string {
    return this.registry.contentType;
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }

  /** Every reply a device gets passes here (Results' observer). */
  reply(reply: Reply): void {
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
    this.requestChildren[priority][outcome].inc();
    this.intervalByPriority[PRIORITY_LABELS.indexOf(priority)]! += 1;
  }

  cacheHit(): void {
    this.cacheHits.inc();
  }

  // --- OverloadObserver ----------------------------------------------------------------

  shed(priority: Priority, reason: ShedReason): void {
    this.shedChildren[priority][reason].inc();
  }

  eventLoopDelay(ms: number): void {
    this.loopDelay.set(ms / 1000);
  }

  // --- SchedulerObserver -------------------------------------------------------------

  claimed(priority: Priority, arrivalMs: number, locked: boolean, claimedAt: number): void {
    const waitS = Math.max(0, claimedAt - arrivalMs) / 1000;
    this.queueWaitChildren[priority].observe(waitS);
    if (locked) {
      this.lockGrants.inc();
      this.lockWait.observe(waitS);
    }
  }

  answered(result: UpstreamResult): void {
    let child = this.upstreamLatencyChildren.get(result.provider);
    if (!child) {
      child = this.upstreamLatency.labels(result.provider);
      this.upstreamLatencyChildren.set(result.provider, child);
    }
    child.observe(result.upstreamMs / 1000);
  }

  coalescedAnswer(): void {
    this.coalesced.inc();
  }

  rateLimitWait(): void {
    this.rateLimitWaits.inc();
  }

  usage(model: string, promptTokens: number, completionTokens: number, costUsd: number): void {
    let children = this.usageChildren.get(model);
    if (!children) {
      children = {
        prompt: this.tokens.labels(model, 'prompt'),
        completion: this.tokens.labels(model, 'completion'),
        cost: this.cost.labels(model),
      };
      this.usageChildren.set(model, children);
    }
    children.prompt.inc(promptTokens);
    children.completion.inc(completionTokens);
    if (costUsd > 0) children.cost.inc(costUsd);
  }

  // --- the bridge/{instanceId}/metrics snapshot ---------------------------------------

  /** The snapshot since the previous one (rates over that interval); starts a new interval. */
  async snapshot(instance: string): Promise<MetricsSnapshot> {
    const queueDepth = (await readQueueDepth(this.sources)) ?? null;
    const now = Date.now();
    const intervalMs = Math.max(1, now - this.intervalStart);
    const perS = (n: number): number => Math.round((n * 1000 * 1000) / intervalMs) / 1000;
    const byPriority = Object.fromEntries(PRIORITY_LABELS.map((p, i) => [p, perS(this.intervalByPriority[i] ?? 0)])) as Record<
      PriorityLabel,
      number
    >;
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

/** The store's queue depth, or undefined when it failed or took over STORE_SCRAPE_TIMEOUT_MS. */
function readQueueDepth(sources: MetricsSources): Promise<QueueDepth | undefined> {
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
