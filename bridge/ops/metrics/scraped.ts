// The metrics whose values are owned elsewhere (queue depth in the store, in-flight count,
// circuit states, connected clients, broker refusals), read at scrape time through `collect`.
import { Counter, Gauge, type Registry } from 'prom-client';
import { PRIORITIES } from '../../../contract/index.js';
import type { BudgetReport } from '../budgets-report.js';
import { registerScadaState } from './scada.js';
import { registerSessionState } from './sessions.js';
import type { CircuitState } from '../../upstream/breaker.js';
import { PREFIX, readQueueDepth, STORE_SCRAPE_TIMEOUT_MS, withTimeout, type MetricsSources } from './common.js';

/** The queue, the jobs this instance holds and the providers' circuits. */
export function registerWorkState(registers: Registry[], sources: MetricsSources): void {
  const depthOfScrape = sharedPerScrape(() => readQueueDepth(sources));
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
  new Counter({
    name: `${PREFIX}dead_letters_dropped_total`,
    help: 'Dead letters this instance dropped, oldest first, to keep the list within DLQ_MAX entries and DLQ_MAX_BYTES',
    registers,
    collect() {
      this.reset();
      this.inc(sources.deadLettersDropped?.() ?? 0);
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
  // Prometheus' enum convention: a series per state, 1 for the current one.
  new Gauge({
    name: `${PREFIX}circuit_state`,
    help: 'Circuit breaker state per provider as this instance last saw it: 1 for the current state (closed, half-open, open), 0 for the others',
    labelNames: ['provider', 'state'] as const,
    registers,
    collect() {
      this.reset();
      for (const { name, circuit } of sources.providers()) {
        for (const state of CIRCUIT_STATES) this.set({ provider: name, state }, state === circuit ? 1 : 0);
      }
    },
  });
}

const CIRCUIT_STATES: readonly CircuitState[] = ['closed', 'half-open', 'open'];

/** The embedded broker's clients and refusals. */
export function registerBrokerState(registers: Registry[], sources: MetricsSources): void {
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
    help: 'Connections refused at CONNECT (credentials, client id, a credentialed id taken anonymously, will topic, MAX_CONNECTIONS, Redis unreachable) or at the WebSocket upgrade (Origin)',
    registers,
    collect() {
      this.reset();
      this.inc(sources.refusals().connect);
    },
  });
  new Counter({
    name: `${PREFIX}acl_refusals_total`,
    help: 'Publishes, subscriptions and unsubscriptions refused by the topic access rules or MAX_TOPIC_LENGTH',
    labelNames: ['action'] as const,
    registers,
    collect() {
      const { publish, subscribe } = sources.refusals();
      this.reset();
      this.inc({ action: 'publish' }, publish);
      this.inc({ action: 'subscribe' }, subscribe);
    },
  });
  new Counter({
    name: `${PREFIX}mqtt_clients_dropped_total`,
    help: 'MQTT connections dropped for not reading what they were sent (backlog over MAX_CLIENT_BACKLOG_BYTES, or not drained within DRAIN_TIMEOUT_MS)',
    labelNames: ['reason'] as const,
    registers,
    collect() {
      const { slow } = sources.refusals();
      this.reset();
      for (const [reason, count] of Object.entries(slow)) this.inc({ reason }, count);
    },
  });
  registerSessionState(registers, sources);
  registerScadaState(registers, sources);
}

/** One read shared by every caller until it settles: the next scrape starts a new one. */
function sharedPerScrape<T>(read: () => Promise<T | undefined>): () => Promise<T | undefined> {
  let pending: Promise<T | undefined> | undefined;
  return () => {
    pending ??= read().finally(() => {
      pending = undefined;
    });
    return pending;
  };
}

/** Each budget's use in its current period (one store read per scrape, bounded like the queue depth's). */
export function registerBudgetState(registers: Registry[], read: () => Promise<BudgetReport>): void {
  const reportOfScrape = sharedPerScrape(() => withTimeout(read(), STORE_SCRAPE_TIMEOUT_MS, 'budgets').catch(() => undefined));
  type Budget = BudgetReport['budgets'][number];
  const perBudget = (name: string, help: string, valueOf: (b: Budget) => number, only: (b: Budget) => boolean = () => true): void => {
    new Gauge({
      name: `${PREFIX}${name}`,
      help,
      labelNames: ['budget'] as const,
      registers,
      async collect() {
        const report = await reportOfScrape();
        this.reset();
        for (const b of report?.budgets ?? []) if (only(b)) this.set({ budget: b.name }, valueOf(b));
      },
    });
  };
  // One metric per unit: a sum over budgets never adds tokens to dollars.
  const used = (b: Budget): number => b.use.reduce((sum, u) => sum + u.used, 0);
  perBudget(
    'budget_used_tokens',
    'Tokens each CONFIG_FILE token budget has used in its current period, all its devices together',
    used,
    (b) => b.unit === 'tokens',
  );
  perBudget(
    'budget_used_usd',
    'US dollars each CONFIG_FILE cost budget has used in its current period, all its devices together',
    used,
    (b) => b.unit === 'usd',
  );
  perBudget('budget_fullest_ratio', 'The largest share of its limit (used and reserved) any device, or the fleet, has of each budget; 1 is used up', (b) =>
    Math.max(0, ...b.use.map((u) => (u.used + u.reserved) / b.limit)),
  );
}
