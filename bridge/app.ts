// The composition root: opens each part once, wires them together and pushes each closer on
// a stack (closers.ts); stop, or a start that fails half-way, runs the stack in reverse.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Broker } from '../broker/broker.js';
import { PRIORITIES, type Priority } from '../contract/index.js';
import { Closers } from './closers.js';
import type { Core } from './core.js';
import { openDashboard } from './wire-dashboard.js';
import type { Config } from './config/config.js';
import { upstreamSettings } from './config/config-file.js';
import { weightOf } from './config/fair-share.js';
import { memoryCoordination, openCoordination, type Coordination } from './coordination.js';
import { IntakeGate } from './intake/gate.js';
import { Intake } from './intake/intake.js';
import { LoadShedder } from './intake/overload.js';
import type { Logger } from './logger.js';
import type { RepeatingLogOptions } from './repeating-log.js';
import type { MqttPort } from './mqtt/port.js';
import { startAdmin, type AdminServer } from './ops/admin/server.js';
import { DEFAULT_TICK_MS } from './ops/dashboard/dashboard.js';
import { DashboardRecorder } from './ops/dashboard/recorder.js';
import { adminApi } from './ops/admin/api.js';
import { budgetReport } from './ops/budgets-report.js';
import { BridgeMetrics } from './ops/metrics/bridge-metrics.js';
import { readiness, type ReadinessState } from './ops/readiness.js';
import { StatusTopics } from './ops/status.js';
import { answerQueuedOnShutdown } from './recovery/shutdown-drain.js';
import { Templates } from './intake/templates.js';
import { rereadConfigFile } from './config/reload.js';
import { Results } from './results/results.js';
import { Scheduler } from './scheduling/scheduler.js';
import { wireScada } from './wire-scada.js';
import type { ScadaOutputs } from './scada/outputs.js';
import type { Store } from './store/port.js';
import type { ProviderChain } from './upstream/chain.js';
import { buildProviderChain } from './upstream/from-config.js';
import { MemoryBreakerStore } from './upstream/breaker-memory.js';
import type { BreakerStore } from './upstream/breaker-port.js';
import { RedisBreakerStore } from './store/breaker-state.js';
import type { ScadaState } from './store/scada-state.js';
import { openSparkplug } from './wire-sparkplug.js';
import { openMqtt } from './wire-mqtt.js';
import { joinLiveness, startAdoption } from './wire-adoption.js';

export interface RunningBridge {
  readonly instanceId: string;
  /** The embedded broker's MQTT port (0 with an external broker). */
  readonly mqttPort: number;
  readonly httpPort: number;
  readonly store: Store;
  readonly mqtt: MqttPort;
  /** The embedded broker; undefined with an external one. */
  readonly broker: Broker | undefined;
  readonly metrics: BridgeMetrics;
  /** What the SCADA outputs share across the fleet (last good answers, the Edge Node's lease, announces). */
  readonly scadaState: ScadaState;
  /** SIGTERM semantics: stop intake, finish or hand back in-flight work, publish offline. */
  shutdown(): Promise<void>;
  /** SIGHUP: CONFIG_FILE's templates, weights and budgets read again; a bad file keeps those in use. */
  reloadConfig(): void;
}

export interface BridgeOptions {
  /** How often bridge/{instanceId}/metrics is published (default 5000; tests use less). */
  metricsIntervalMs?: number;
  /** How often the operator dashboard takes a point (default 2000; tests use less). */
  dashboardTickMs?: number;
  /** The Sparkplug Edge Node's lease lifetime (default 6000; tests use less). */
  sparkplugLeaseTtlMs?: number;
  /** How often a repeating condition (broker or Redis out of reach) is logged again (default 60 000; tests use less). */
  repeatLogIntervalMs?: number;
}

const DEFAULT_METRICS_INTERVAL_MS = 5000;
/** A stop may take SHUTDOWN_GRACE_MS for the work in flight, and this long for the rest (status, connections). */
const STOP_MARGIN_MS = 10_000;

/**
 * `upstreamUrl` must be resolved by the caller (service.ts: UPSTREAM_URL, or its entry's stand-in).
 * `store` replaces the one the configuration implies (tests wrap it to slow or fail steps).
 */
export async function startBridge(
  config: Config & { upstreamUrl: string },
  logger: Logger,
  store?: Store,
  options: BridgeOptions = {},
): Promise<RunningBridge> {
  const instanceId = config.instanceId ?? `bridge-${randomBytes(4).toString('hex')}`;
  const identity = { instanceId, owner: `${instanceId}.${randomBytes(4).toString('hex')}`, since: new Date().toISOString() };
  const log = logger.child({ instance: instanceId });
  const closers = new Closers(log);
  try {
    const repeatLog = { intervalMs: options.repeatLogIntervalMs };
    const coordination = await openStore(config, log, closers, store, repeatLog);
    const upstream = openUpstream(config, coordination, log, closers);
    const gate = new IntakeGate();
    await joinLiveness(config, coordination, instanceId, log, closers);
    const mqtt = await openMqtt(config, identity, gate.handler, log, coordination, repeatLog, closers);
    const sparkplug = await openSparkplug({
      config,
      instanceId,
      owner: identity.owner,
      mqtt,
      state: coordination.scada,
      log,
      leaseTtlMs: options.sparkplugLeaseTtlMs,
      closers,
    });
    const live = { templates: new Templates(config.file.templates), weights: config.file.weights, budgets: config.file.budgets };
    return await startPipeline({ config, identity, log, closers, coordination, upstream, mqtt, live, sparkplug }, gate, options);
  } catch (err) {
    await closers.closeAll().catch(() => undefined);
    throw err;
  }
}

async function openStore(config: Config, log: Logger, closers: Closers, store: Store | undefined, repeatLog: RepeatingLogOptions): Promise<Coordination> {
  const coordination = store ? memoryCoordination(store, config) : await openCoordination(config, log, repeatLog);
  closers.push('store', async () => {
    await coordination.store.close();
    await coordination.close();
  });
  return coordination;
}

/** The providers the upstream calls go to, with each one's circuit where the coordination keeps state. */
function openUpstream(config: Config & { upstreamUrl: string }, coordination: Coordination, log: Logger, closers: Closers): ProviderChain {
  const upstream = buildProviderChain(
    config,
    upstreamSettings(config, config.file),
    breakerStore(config, coordination.redis),
    log.child({ module: 'upstream' }),
  );
  closers.push('upstream', () => upstream.close());
  return upstream;
}

/** Each provider's circuit in Redis when the bridge coordinates through one, so every instance shares it. */
function breakerStore(config: Config, redis: Redis | undefined): BreakerStore {
  return redis ? new RedisBreakerStore(redis, config.redisPrefix) : new MemoryBreakerStore();
}

/**
 * Metrics, results, admin HTTP, status, overload guard, scheduler, intake, then `online` and
 * the claim loop: each opened part pushes its closer, so a stop closes intake first, then lets
 * the scheduler finish, then goes offline.
 */
async function startPipeline(core: Core, gate: IntakeGate, options: BridgeOptions): Promise<RunningBridge> {
  const { config, identity, log, closers, coordination, mqtt } = core;
  const { store } = coordination;
  let stopping = false;
  // Opened after the admin HTTP and the overload guard, which read it only once it runs.
  let scheduler: Scheduler | undefined;
  const recorder = new DashboardRecorder(identity.instanceId);
  const metrics = buildMetrics(core, recorder, { inFlight: () => scheduler?.inFlight ?? 0, scada: () => scada });
  const { results, scada } = buildResults(core, metrics);
  const admin = await openAdmin(
    core,
    metrics,
    () => scheduler,
    () => stopping,
    { recorder, tickMs: options.dashboardTickMs ?? DEFAULT_TICK_MS },
  );
  const status = openStatus(core, metrics, options);
  const shedder = openShedder(core, metrics, () => scheduler);
  const running = openScheduler(core, { results, metrics, shedder });
  scheduler = running;
  openIntake(core, gate, { results, shedder, scheduler: running, metrics });
  startAdoption(core, gate.handler);
  // Intake opens first: with the plant's broker, requests waiting in the session arrive on the
  // same connection ahead of the status message's PUBACK, which waits behind their admission.
  await status.online();
  closers.push('metrics snapshots', () => status.stopSnapshots());
  running.start();
  const { mqtt: mqttPort, mqttTls: mqttTlsPort, mqttWs: mqttWsPort } = mqtt.ports;
  log.info({ broker: mqtt.mode, mqttPort, mqttTlsPort, mqttWsPort, httpPort: admin.port, store: coordination.kind }, 'bridge ready');

  return {
    instanceId: identity.instanceId,
    mqttPort: mqtt.ports.mqtt ?? 0,
    httpPort: admin.port,
    store,
    mqtt,
    broker: mqtt.broker,
    metrics,
    scadaState: coordination.scada,
    reloadConfig: () => reloadLive(core),
    async shutdown() {
      if (stopping) return;
      stopping = true;
      log.info({ graceMs: config.shutdownGraceMs, inFlight: running.inFlight }, 'shutting down');
      await closers.closeAll(config.shutdownGraceMs + STOP_MARGIN_MS);
      log.info('stopped');
    },
  };
}

/** The metrics, reading the parts started after them (the scheduler, the SCADA outputs) when scraped. */
function buildMetrics(
  { coordination: { store }, upstream, mqtt, live, sparkplug }: Core,
  recorder: DashboardRecorder,
  later: { inFlight(): number; scada(): ScadaOutputs | undefined },
): BridgeMetrics {
  return new BridgeMetrics(
    {
      queueDepth: () => store.operations.queueDepth(),
      inFlight: () => later.inFlight(),
      providers: () => upstream.health(),
      connectedClients: () => mqtt.clientCount(),
      refusals: () => mqtt.refusals(),
      sessions: () => mqtt.broker?.sessions,
      deadLettersDropped: () => store.operations.deadLetters.dropped(),
      budgets: () => budgetReport(live.budgets, store.operations, Date.now()),
      scada: () => {
        const scada = later.scada();
        return scada && { ...scada.counts, sparkplugPublishing: sparkplug?.node.publishing };
      },
    },
    recorder,
  );
}

/** Where replies leave, and the SCADA outputs (UNS, Sparkplug) every template reply also goes to. */
function buildResults(core: Core, metrics: BridgeMetrics): { results: Results; scada: ScadaOutputs | undefined } {
  const { config, coordination, mqtt, log, closers } = core;
  const streamSettings = { flushMs: config.streamFlushMs, flushBytes: config.streamFlushBytes, qos: config.streamQos };
  const sparkplug = core.sparkplug !== undefined;
  const scada = wireScada({ config, state: coordination.scada, publish: mqtt.publish, templates: core.live.templates, logger: log, closers, sparkplug });
  return { results: new Results(mqtt.publish, metrics, Date.now, streamSettings, scada), scada };
}

/** The admin HTTP: /healthz, /readyz, /metrics, the operator API and the dashboard. */
async function openAdmin(
  core: Core,
  metrics: BridgeMetrics,
  scheduler: () => Scheduler | undefined,
  stopping: () => boolean,
  board: { recorder: DashboardRecorder; tickMs: number },
): Promise<AdminServer> {
  const { config, identity, log, closers, coordination, upstream, mqtt } = core;
  let httpPort = config.httpPort;
  const ready = (port: number): ReadinessState =>
    readiness({ instanceId: identity.instanceId, stopping, store: coordination, providers: () => upstream.health(), mqtt }, port);
  const dashboard = await openDashboard(core, { ...board, readiness: () => ready(httpPort), inFlight: () => scheduler()?.inFlight ?? 0 });
  const admin = await startAdmin({
    host: config.httpHost,
    port: config.httpPort,
    adminToken: config.adminToken,
    logger: log.child({ module: 'admin' }),
    metrics,
    readiness: ready,
    dashboard,
    api: adminApi({
      store: coordination.store,
      priorityOffsetsMs: config.priorityOffsetsMs,
      wake: () => scheduler()?.wake(),
      clientIds: () => mqtt.clientIds(),
      budgets: () => core.live.budgets,
    }),
  });
  closers.push('admin', () => admin.close());
  httpPort = admin.port;
  return admin;
}

/** bridge/{instanceId}/status and /metrics: `offline` is the stop's last word to MQTT. */
function openStatus({ identity, mqtt, log, closers }: Core, metrics: BridgeMetrics, options: BridgeOptions): StatusTopics {
  const status = new StatusTopics({
    ...identity,
    publish: mqtt.publish,
    snapshot: () => metrics.snapshot(identity.instanceId),
    intervalMs: options.metricsIntervalMs ?? DEFAULT_METRICS_INTERVAL_MS,
    logger: log,
  });
  closers.push('status', () => status.offline());
  return status;
}

/** Load shedding at admission: event-loop delay, pending admissions and, when set, queue wait. */
function openShedder({ config, coordination, log, closers }: Core, metrics: BridgeMetrics, scheduler: () => Scheduler | undefined): LoadShedder {
  const queueEstimate = {
    depth: () => coordination.store.operations.queueDepth(),
    capacityPerS: (): number | undefined => scheduler()?.capacityPerS(coordination.instances()),
  };
  const shedder = new LoadShedder({
    overloadDelayMs: config.overloadDelayMs,
    maxPendingAdmissions: config.maxPendingAdmissions,
    overloadQueueWaitMs: config.overloadQueueWaitMs,
    ...(config.overloadQueueWaitMs > 0 ? { queueEstimate } : {}),
    logger: log.child({ module: 'overload' }),
    observer: metrics,
  });
  shedder.start();
  closers.push('overload guard', () => shedder.stop());
  return shedder;
}

/** The claim loop; its stop lets the work in flight finish (SHUTDOWN_GRACE_MS) and answers what stays queued in memory. */
function openScheduler(core: Core, { results, metrics, shedder }: { results: Results; metrics: BridgeMetrics; shedder: LoadShedder }): Scheduler {
  const { config, identity, log, closers, coordination, upstream } = core;
  const { prices, embeddingModel } = config.file;
  const scheduler = new Scheduler({
    config: { ...config, prices, embeddingModel },
    store: coordination.store,
    upstream,
    results,
    logger: log.child({ module: 'scheduler' }),
    owner: identity.owner,
    observer: metrics,
    queueWait: shedder,
    outage: coordination.outage,
  });
  closers.push('scheduler', async () => {
    await scheduler.stop(config.shutdownGraceMs);
    await answerQueuedOnShutdown(coordination.store, results, log);
  });
  return scheduler;
}

/** SIGHUP: CONFIG_FILE's templates, weights and budgets read again (config/reload.ts). */
function reloadLive({ config, live, log }: Core): void {
  const file = rereadConfigFile(config.configFile, config.file, log);
  if (!file) return;
  live.templates.replace(file.templates);
  live.weights = file.weights;
  live.budgets = file.budgets;
  const budgets = file.budgets.limits.map((l) => l.name);
  log.info({ templates: live.templates.names(), weights: Object.keys(file.weights).length, budgets }, 'CONFIG_FILE reloaded: templates, weights and budgets');
}

/** Admission behind the gate the broker already delivers to; its stop first lets the broker stop delivering. */
function openIntake(core: Core, gate: IntakeGate, parts: { results: Results; shedder: LoadShedder; scheduler: Scheduler; metrics: BridgeMetrics }): void {
  const intake = buildIntake(core, parts);
  gate.open(intake, parts.metrics);
  core.closers.push('intake', async () => {
    await core.mqtt.quiesce();
    intake.stop();
  });
}

function buildIntake(
  { config, coordination, log, live }: Core,
  { results, shedder, scheduler, metrics }: { results: Results; shedder: LoadShedder; scheduler: Scheduler; metrics: BridgeMetrics },
): Intake {
  const { routing, cache, embeddingModel } = config.file;
  // A priority's route is part of its requests' cache key: serialised once, not per request.
  const routes = Object.fromEntries(PRIORITIES.map((p) => [p, JSON.stringify(routing[p] ?? null)])) as Record<Priority, string>;
  return new Intake({
    config,
    store: coordination.store,
    results,
    logger: log.child({ module: 'intake' }),
    shedder,
    cache: {
      ttlS: config.cacheTtlS,
      allowTemperature: cache.allowTemperature,
      defaultModel: config.upstreamModel,
      defaultEmbeddingModel: embeddingModel,
    },
    routeOf: (priority) => routes[priority],
    dispatch: scheduler,
    templates: live.templates,
    weightOf: (deviceId) => weightOf(live.weights, deviceId),
    budgets: {
      get budgets() {
        return live.budgets;
      },
      prices: config.file.prices,
      defaultModel: config.upstreamModel,
      defaultEmbeddingModel: embeddingModel,
    },
    onBudgetRefused: (budget) => metrics.budgetRefused(budget),
    onReplyDropped: () => metrics.refusalReplyDropped(),
  });
}
