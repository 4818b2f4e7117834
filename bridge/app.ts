// The composition root: opens each part once, wires them together and pushes each closer on
// a stack (closers.ts); stop, or a start that fails half-way, runs the stack in reverse.
import { randomBytes } from 'node:crypto';
import type { Broker } from '../broker/broker.js';
import { PRIORITIES, topics, type Priority, type RequestHandler } from '../contract/index.js';
import { Closers } from './closers.js';
import type { Core, Identity } from './core.js';
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
import { openEmbedded } from './mqtt/embedded.js';
import { openExternal } from './mqtt/external.js';
import type { MqttPort } from './mqtt/port.js';
import { startAdmin, type AdminServer } from './ops/admin.js';
import { DEFAULT_TICK_MS } from './ops/dashboard/dashboard.js';
import { DashboardRecorder } from './ops/dashboard/recorder.js';
import { adminApi } from './ops/admin-api.js';
import { budgetReport } from './ops/budgets-report.js';
import { BridgeMetrics } from './ops/metrics.js';
import { readiness, type ReadinessState } from './ops/readiness.js';
import { statusMessage, StatusTopics } from './ops/status.js';
import { answerQueuedOnShutdown } from './recovery/shutdown-drain.js';
import { Templates } from './intake/templates.js';
import { rereadConfigFile } from './config/reload.js';
import { Results } from './results/results.js';
import { Scheduler } from './scheduling/scheduler.js';
import { scadaObserverTopics, wireScada } from './wire-scada.js';
import type { ScadaOutputs } from './scada/outputs.js';
import type { Store } from './store/types.js';
import { buildProviderChain } from './upstream/from-config.js';
import type { ScadaState } from './store/scada-state.js';
import { startSparkplug } from './wire-sparkplug.js';
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
    const upstream = buildProviderChain(config, upstreamSettings(config, config.file), coordination.redis, log.child({ module: 'upstream' }));
    closers.push('upstream', () => upstream.close());
    const gate = new IntakeGate();
    await joinLiveness(config, coordination, instanceId, log, closers);
    const mqtt = await openMqtt(config, identity, gate.handler, log, coordination, repeatLog);
    closers.push('mqtt', () => mqtt.close());
    const sparkplug = await startSparkplug({ config, instanceId, owner: identity.owner, mqtt, state: coordination.scada, log, leaseTtlMs: options.sparkplugLeaseTtlMs });
    if (sparkplug) closers.push('sparkplug', () => sparkplug.stop());
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

/** The embedded broker, or the plant's broker joined as a client (BROKER_URL). */
async function openMqtt(
  config: Config,
  { instanceId, since }: Identity,
  onRequest: RequestHandler,
  log: Logger,
  coordination: Coordination,
  repeatLog: RepeatingLogOptions,
): Promise<MqttPort & { broker?: Broker }> {
  const { brokerUrl } = config;
  if (brokerUrl === undefined) {
    try {
      // A CONNECT while Redis is unreachable is refused at once rather than left waiting for the sessions.
      const brokerConfig = { ...config, observerTopics: scadaObserverTopics(config) };
      return await openEmbedded(brokerConfig, onRequest, log, coordination.plugins, { available: () => coordination.healthy() });
    } catch (err) {
      await coordination.plugins?.close(); // the broker owns the plugins only once it started
      throw err;
    }
  }
  // With a liveness lease another instance adopts what a crashed start left (wire-adoption.ts).
  if (config.instanceId === undefined && (coordination.sessions === undefined || config.brokerAdoptAfterMs === 0)) {
    log.warn(
      'INSTANCE_ID is not set: this start joins the broker under a new client id, so what the previous one left unacknowledged in its session waits there until BROKER_SESSION_EXPIRY_S; set a stable INSTANCE_ID',
    );
  }
  const status = { online: statusMessage('online', instanceId, since), offline: statusMessage('offline', instanceId, since) };
  return openExternal({ ...config, brokerUrl }, instanceId, { topic: topics.status(instanceId), ...status }, onRequest, log, repeatLog);
}

/** Metrics, results, overload guard, scheduler, admin HTTP, intake, then `online` and the claim loop. */
async function startPipeline(core: Core, gate: IntakeGate, options: BridgeOptions): Promise<RunningBridge> {
  const { config, identity, log, closers, coordination, upstream, mqtt } = core;
  const { store } = coordination;
  let stopping = false;
  const recorder = new DashboardRecorder(identity.instanceId);
  const metrics = buildMetrics(core, recorder, { inFlight: () => scheduler.inFlight, scada: () => scada });
  const { results, scada } = buildResults(core, metrics);
  const shedder = buildShedder(core, metrics, () => scheduler);
  const { prices, embeddingModel } = config.file;
  const scheduler: Scheduler = new Scheduler(
    { ...config, prices, embeddingModel },
    store,
    upstream,
    results,
    log.child({ module: 'scheduler' }),
    identity.owner,
    Date.now,
    metrics,
    shedder,
    coordination.outage,
  );
  const admin = await openAdmin(core, metrics, scheduler, () => stopping, { recorder, tickMs: options.dashboardTickMs ?? DEFAULT_TICK_MS });
  const status = new StatusTopics({
    ...identity,
    publish: mqtt.publish,
    snapshot: () => metrics.snapshot(identity.instanceId),
    intervalMs: options.metricsIntervalMs ?? DEFAULT_METRICS_INTERVAL_MS,
    logger: log,
  });
  closers.push('status', () => status.offline());
  shedder.start();
  closers.push('overload guard', () => shedder.stop());
  closers.push('scheduler', async () => {
    await scheduler.stop(config.shutdownGraceMs);
    await answerQueuedOnShutdown(store, results, log);
  });
  const intake = openIntake(core, { results, shedder, scheduler, metrics });
  gate.open(intake, metrics);
  closers.push('intake', async () => {
    await mqtt.quiesce();
    intake.stop();
  });
  startAdoption(core, gate.handler);
  // Intake opens first: with the plant's broker, requests waiting in the session arrive on the
  // same connection ahead of the status message's PUBACK, which waits behind their admission.
  await status.online();
  closers.push('metrics snapshots', () => status.stopSnapshots());
  scheduler.start();
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
      log.info({ graceMs: config.shutdownGraceMs, inFlight: scheduler.inFlight }, 'shutting down');
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
  return new BridgeMetrics({
    queueDepth: () => store.queueDepth(),
    inFlight: () => later.inFlight(),
    providers: () => upstream.health(),
    connectedClients: () => mqtt.clientCount(),
    refusals: () => mqtt.refusals(),
    sessions: () => mqtt.broker?.sessions,
    deadLettersDropped: () => store.deadLetters.dropped(),
    budgets: () => budgetReport(live.budgets, store, Date.now()),
    scada: () => {
      const scada = later.scada();
      return scada && { ...scada.counts, sparkplugPublishing: sparkplug?.node.publishing };
    },
  }, recorder);
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
  scheduler: Scheduler,
  stopping: () => boolean,
  board: { recorder: DashboardRecorder; tickMs: number },
): Promise<AdminServer> {
  const { config, identity, log, closers, coordination, upstream, mqtt } = core;
  let httpPort = config.httpPort;
  const ready = (port: number): ReadinessState =>
    readiness({ instanceId: identity.instanceId, stopping, store: coordination, providers: () => upstream.health(), mqtt }, port);
  const dashboard = await openDashboard(core, { ...board, readiness: () => ready(httpPort), inFlight: () => scheduler.inFlight });
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
      wake: () => scheduler.wake(),
      clientIds: () => mqtt.clientIds(),
      budgets: () => core.live.budgets,
    }),
  });
  closers.push('admin', () => admin.close());
  httpPort = admin.port;
  return admin;
}

/** Load shedding at admission: event-loop delay, pending admissions and, when set, queue wait. */
function buildShedder({ config, coordination, log }: Core, metrics: BridgeMetrics, scheduler: () => Scheduler): LoadShedder {
  const queueEstimate = {
    depth: () => coordination.store.queueDepth(),
    capacityPerS: (): number | undefined => scheduler().capacityPerS(coordination.instances()),
  };
  return new LoadShedder({
    overloadDelayMs: config.overloadDelayMs,
    maxPendingAdmissions: config.maxPendingAdmissions,
    overloadQueueWaitMs: config.overloadQueueWaitMs,
    ...(config.overloadQueueWaitMs > 0 ? { queueEstimate } : {}),
    logger: log.child({ module: 'overload' }),
    observer: metrics,
  });
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

function openIntake(
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
