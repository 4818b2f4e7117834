// The composition root: builds every part once and wires them together.
import { randomBytes } from 'node:crypto';
import { startBroker, type Broker } from '../broker/broker.js';
import { startAdmin, type AdminServer } from './admin.js';
import type { Config } from './config.js';
import { upstreamSettings } from './config-file.js';
import { topics, type Status } from './contract.js';
import { BridgeError, errorReply } from './errors.js';
import { readConfigFile } from './config-file.js';
import { Intake } from './intake.js';
import type { Logger } from './logger.js';
import { Results } from './results.js';
import { Scheduler } from './scheduler.js';
import { openCoordination, type Coordination } from './coordination.js';
import type { Store } from './store/types.js';
import { buildProviderChain } from './upstream/from-config.js';
import { VERSION } from './version.js';

export interface RunningBridge {
  readonly instanceId: string;
  readonly mqttPort: number;
  readonly httpPort: number;
  readonly store: Store;
  readonly broker: Broker;
  /** SIGTERM semantics: stop intake, finish or hand back in-flight work, publish offline. */
  shutdown(): Promise<void>;
}

/**
 * `upstreamUrl` must be resolved by the caller (main starts the simulator when it is unset).
 * `store` replaces the one the configuration implies (tests wrap it to slow or fail steps).
 */
export async function startBridge(
  config: Config & { upstreamUrl: string },
  logger: Logger,
  store?: Store,
): Promise<RunningBridge> {
  const instanceId = `bridge-${randomBytes(4).toString('hex')}`;
  const log = logger.child({ instance: instanceId });
  // Read before anything starts: a bad CONFIG_FILE is a ConfigError (exit 2 in main).
  const upstreamConfig = upstreamSettings(config, readConfigFile(config.configFile));
  const coordination: Coordination = store
    ? { kind: 'memory', store, plugins: undefined, healthy: () => true, close: async () => {} }
    : await openCoordination(config, log);
  // The provider chain (primary, fallback, CONFIG_FILE providers) with a circuit breaker per
  // provider, shared through Redis when the bridge coordinates through one.
  const upstream = buildProviderChain(config, upstreamConfig, coordination.redis, log.child({ module: 'upstream' }));

  // The broker and the results sink need each other: intake runs inside the broker's hooks
  // and replies through the broker, so the handler is bound once both exist.
  let intake: Intake | undefined;
  let broker: Broker;
  try {
    broker = await startBroker(
      config,
      (topic, payload) => (intake ? intake.handle(topic, payload) : Promise.resolve()),
      log,
      coordination.plugins,
    );
  } catch (err) {
    await coordination.plugins?.close(); // the broker owns the plugins only once it started
    await coordination.close();
    throw err;
  }
  const results = new Results(broker.publish);
  const { routing, cache, prices, embeddingModel } = readConfigFile(config.configFile);
  const scheduler = new Scheduler(
    { ...config, prices, embeddingModel },
    coordination.store,
    upstream,
    results,
    log.child({ module: 'scheduler' }),
    instanceId,
  );
  intake = new Intake({
    config,
    store: coordination.store,
    results,
    logger: log.child({ module: 'intake' }),
    cache: {
      ttlS: config.cacheTtlS,
      allowTemperature: cache.allowTemperature,
      defaultModel: config.upstreamModel,
      defaultEmbeddingModel: embeddingModel,
    },
    routeOf: (priority) => JSON.stringify(routing[priority] ?? null),
    onQueued: () => scheduler.wake(),
  });

  let stopping = false;
  let admin: AdminServer;
  try {
    admin = await startAdmin(config.httpHost, config.httpPort, (httpPort) => ({
      ready: !stopping && coordination.healthy(),
      store: coordination.kind,
      ports: { mqtt: broker.mqttPort, http: httpPort },
      instance: instanceId,
      version: VERSION,
    }));
  } catch (err) {
    await broker.close();
    await coordination.close();
    throw err;
  }

  const since = new Date().toISOString();
  const publishStatus = (state: Status['state']): Promise<void> => {
    const status: Status = { state, instance: instanceId, version: VERSION, since };
    return broker.publish(topics.status(instanceId), Buffer.from(JSON.stringify(status)), { qos: 1, retain: true });
  };
  await publishStatus('online');
  scheduler.start();
  log.info({ mqttPort: broker.mqttPort, httpPort: admin.port, store: coordination.kind }, 'bridge ready');

  return {
    instanceId,
    mqttPort: broker.mqttPort,
    httpPort: admin.port,
    store: coordination.store,
    broker,
    async shutdown() {
      if (stopping) return;
      stopping = true;
      log.info({ graceMs: config.shutdownGraceMs, inFlight: scheduler.inFlight }, 'shutting down');
      intake?.stop();
      await scheduler.stop(config.shutdownGraceMs);
      const { store } = coordination;
      if (!store.durable) {
        // Queued work cannot outlive this process: answer it rather than lose it silently.
        const unfinished = await store.drain();
        const error = new BridgeError('unavailable', 'bridge is shutting down');
        for (const job of unfinished) await results.send(job.deviceId, errorReply(job.id, error, job.priority));
        if (unfinished.length > 0) log.warn({ count: unfinished.length }, 'queued requests answered unavailable');
      }
      await publishStatus('offline');
      await admin.close();
      await broker.close();
      await upstream.close();
      await store.close();
      await coordination.close();
      log.info('stopped');
    },
  };
}
