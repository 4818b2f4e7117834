// The composition root: builds every part once and wires them together.
import { randomBytes } from 'node:crypto';
import { startAdmin, type AdminServer } from './ops/admin.js';
import type { Config } from './config/config.js';
import { upstreamSettings } from './config/config-file.js';
import {
  BridgeError,
  deviceIdOfClientId,
  pubackReasonOf,
  type RequestHandler,
  type Status,
  topics,
} from '../contract/index.js';
import { errorReply } from './results/replies.js';
import { readConfigFile } from './config/config-file.js';
import { Intake } from './intake/intake.js';
import type { Logger } from './logger.js';
import { BridgeMetrics } from './ops/metrics.js';
import { openEmbedded, type EmbeddedPort } from './mqtt/embedded.js';
import { openExternal, type ExternalPort } from './mqtt/external.js';
import type { MqttPort } from './mqtt/port.js';
import type { Broker } from '../broker/broker.js';
import { Results } from './results/results.js';
import { LoadShedder } from './intake/overload.js';
import { Scheduler } from './scheduling/scheduler.js';
import { openCoordination, type Coordination } from './store/coordination.js';
import type { Store } from './store/types.js';
import { buildProviderChain } from './upstream/from-config.js';
import { VERSION } from './version.js';

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
  /** SIGTERM semantics: stop intake, finish or hand back in-flight work, publish offline. */
  shutdown(): Promise<void>;
}

export interface BridgeOptions {
  /** How often bridge/{instanceId}/metrics is published (default 5000; tests use less). */
  metricsIntervalMs?: number;
}

const DEFAULT_METRICS_INTERVAL_MS = 5000;

/**
 * `upstreamUrl` must be resolved by the caller (main starts the simulator when it is unset).
 * `store` replaces the one the configuration implies (tests wrap it to slow or fail steps).
 */
export async function startBridge(
  config: Config & { upstreamUrl: string },
  logger: Logger,
  store?: Store,
  options: BridgeOptions = {},
): Promise<RunningBridge> {
  const instanceId = config.instanceId ?? `bridge-${randomBytes(4).toString('hex')}`;
  // Leases name the process, not the instance: a restarted INSTANCE_ID must never renew or
  // complete what its predecessor (perhaps only paused) still holds.
  const owner = `${instanceId}.${randomBytes(4).toString('hex')}`;
  const since = new Date().toISOString();
  const statusOf = (state: Status['state']): Buffer =>
    Buffer.from(JSON.stringify({ state, instance: instanceId, version: VERSION, since } satisfies Status));
  const log = logger.child({ instance: instanceId });
  // Read before anything starts: a bad CONFIG_FILE is a ConfigError (exit 2 in main).
  const upstreamConfig = upstreamSettings(config, readConfigFile(config.configFile));
  const coordination: Coordination = store
    ? { kind: 'memory', store, plugins: undefined, healthy: () => true, instances: () => 1, close: async () => {} }
    : await openCoordination(config, log);
  // The provider chain (primary, fallback, CONFIG_FILE providers) with a circuit breaker per
  // provider, shared through Redis when the bridge coordinates through one.
  const upstream = buildProviderChain(config, upstreamConfig, coordination.redis, log.child({ module: 'upstream' }));

  // The broker and the results sink need each other: intake runs inside the broker's hooks
  // and replies through the broker, so the handler is bound once both exist.
  let intake: Intake | undefined;
  let mqtt: EmbeddedPort | ExternalPort;
  let metrics: BridgeMetrics | undefined;
  // Requests may arrive before intake exists (the plant's broker delivers what waited in the
  // bridge's session as soon as it connects): they wait for it rather than being acknowledged.
  // (A start that fails before intake exists leaves them unacknowledged: the broker keeps them.)
  let intakeOpened: (intake: Intake) => void = () => {};
  const intakeReady = new Promise<Intake>((resolve) => (intakeOpened = resolve));
  const onRequest: RequestHandler = async (request) => {
    const result = await (intake ?? (await intakeReady)).handle(request);
    if (result.outcome === 'cached') metrics?.cacheHit();
    if (result.outcome === 'rejected') return { reasonCode: pubackReasonOf(result.error.code), reasonString: result.error.message };
  };
  try {
    const { brokerUrl } = config;
    if (brokerUrl !== undefined && config.instanceId === undefined) {
      log.warn(
        'INSTANCE_ID is not set: this start joins the broker under a new client id, so what the previous one left unacknowledged in its session waits there until BROKER_SESSION_EXPIRY_S; set a stable INSTANCE_ID',
      );
    }
    mqtt =
      brokerUrl === undefined
        ? await openEmbedded(config, onRequest, log, coordination.plugins)
        : await openExternal(
            { ...config, brokerUrl },
            instanceId,
            { topic: topics.status(instanceId), online: statusOf('online'), offline: statusOf('offline') },
            onRequest,
            log,
          );
  } catch (err) {
    await coordination.plugins?.close(); // the broker owns the plugins only once it started
    await coordination.close();
    throw err;
  }
  let schedulerRef: Scheduler | undefined;
  metrics = new BridgeMetrics({
    queueDepth: () => coordination.store.queueDepth(),
    inFlight: () => schedulerRef?.inFlight ?? 0,
    providers: () => upstream.health(),
    connectedClients: () => mqtt.clientIds().length,
    refusals: () => mqtt.refusals(),
  });
  const results = new Results(mqtt.publish, metrics);
  const { routing, cache, prices, embeddingModel } = readConfigFile(config.configFile);
  const shedder = new LoadShedder({
    overloadDelayMs: config.overloadDelayMs,
    maxPendingAdmissions: config.maxPendingAdmissions,
    overloadQueueWaitMs: config.overloadQueueWaitMs,
    ...(config.overloadQueueWaitMs > 0
      ? {
          queueEstimate: {
            depth: () => coordination.store.queueDepth(),
            capacityPerS: (): number | undefined => scheduler.capacityPerS(coordination.instances()),
          },
        }
      : {}),
    logger: log.child({ module: 'overload' }),
    observer: metrics,
  });
  const scheduler = new Scheduler(
    { ...config, prices, embeddingModel },
    coordination.store,
    upstream,
    results,
    log.child({ module: 'scheduler' }),
    owner,
    Date.now,
    metrics,
    shedder,
  );
  schedulerRef = scheduler;
  shedder.start();
  intake = new Intake({
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
    routeOf: (priority) => JSON.stringify(routing[priority] ?? null),
    dispatch: scheduler,
  });
  intakeOpened(intake);

  let stopping = false;
  let admin: AdminServer;
  try {
    admin = await startAdmin({
      host: config.httpHost,
      port: config.httpPort,
      adminToken: config.adminToken,
      logger: log.child({ module: 'admin' }),
      metrics,
      readiness: (httpPort) => {
        const storeReachable = coordination.healthy();
        const providers = upstream.health().map(({ name, circuit, available }) => ({ name, circuit, available }));
        // An open circuit whose cool-down is over counts: otherwise an idle instance that no
        // traffic reaches would never send the probe that closes it.
        const providerAvailable = providers.some((p) => p.available);
        const brokerConnected = mqtt.connected();
        return {
          ready: !stopping && storeReachable && providerAvailable && brokerConnected,
          listening: !stopping,
          store: coordination.kind,
          storeReachable,
          broker: mqtt.mode,
          brokerConnected,
          providers,
          ports: { ...mqtt.ports, http: httpPort },
          instance: instanceId,
          version: VERSION,
        };
      },
      api: {
        deadLetters: () => coordination.store.deadLetters(),
        replay: async (keys) => {
          const count = await coordination.store.replayDeadLetters(keys, config.priorityOffsetsMs, Date.now());
          if (count > 0) scheduler.wake();
          return count;
        },
        purge: () => coordination.store.purgeDeadLetters(),
        usage: (hours) => {
          const now = Date.now();
          return coordination.store.usage(now - hours * 3_600_000, now);
        },
        devices: () => {
          const byDevice = new Map<string | null, string[]>();
          for (const id of mqtt.clientIds()) {
            const deviceId = deviceIdOfClientId(id);
            const list = byDevice.get(deviceId);
            if (list) list.push(id);
            else byDevice.set(deviceId, [id]);
          }
          return [...byDevice].map(([deviceId, clientIds]) => ({ deviceId, clientIds: clientIds.sort() }));
        },
      },
    });
  } catch (err) {
    shedder.stop();
    await mqtt.close();
    await coordination.close();
    throw err;
  }

  const publishStatus = (state: Status['state']): Promise<void> =>
    mqtt.publish(topics.status(instanceId), statusOf(state), { qos: 1, retain: true });
  await publishStatus('online');
  scheduler.start();

  // bridge/{instanceId}/metrics: a JSON snapshot every interval, not retained.
  const metricsTopic = topics.metrics(instanceId);
  let snapshotting = false;
  const metricsTimer = setInterval(() => {
    if (snapshotting || stopping) return; // a slow store: skip a beat rather than pile up
    snapshotting = true;
    metrics
      .snapshot(instanceId)
      .then((snapshot) => mqtt.publish(metricsTopic, Buffer.from(JSON.stringify(snapshot)), { qos: 0, retain: false }))
      .catch((err: unknown) => log.warn({ err }, 'could not publish the metrics snapshot'))
      .finally(() => {
        snapshotting = false;
      });
  }, options.metricsIntervalMs ?? DEFAULT_METRICS_INTERVAL_MS);
  metricsTimer.unref();
  const { mqtt: mqttPort, mqttTls: mqttTlsPort, mqttWs: mqttWsPort } = mqtt.ports;
  log.info({ broker: mqtt.mode, mqttPort, mqttTlsPort, mqttWsPort, httpPort: admin.port, store: coordination.kind }, 'bridge ready');

  return {
    instanceId,
    mqttPort: mqtt.ports.mqtt ?? 0,
    httpPort: admin.port,
    store: coordination.store,
    mqtt,
    broker: mqtt.mode === 'embedded' ? mqtt.broker : undefined,
    metrics,
    async shutdown() {
      if (stopping) return;
      stopping = true;
      clearInterval(metricsTimer);
      log.info({ graceMs: config.shutdownGraceMs, inFlight: scheduler.inFlight }, 'shutting down');
      await mqtt.quiesce();
      intake?.stop();
      shedder.stop();
      await scheduler.stop(config.shutdownGraceMs);
      const { store } = coordination;
      if (!store.durable) {
        // Queued work cannot outlive this process: answer it rather than lose it silently.
        const unfinished = await store.drain();
        const error = new BridgeError('unavailable', 'bridge is shutting down');
        for (const job of unfinished) await results.send(job, errorReply(job.id, error, job.priority));
        if (unfinished.length > 0) log.warn({ count: unfinished.length }, 'queued requests answered unavailable');
      }
      await publishStatus('offline');
      await admin.close();
      await mqtt.close();
      await upstream.close();
      await store.close();
      await coordination.close();
      log.info('stopped');
    },
  };
}
