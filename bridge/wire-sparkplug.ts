// Wiring of the Sparkplug B Edge Node (SPARKPLUG_GROUP_ID set): its link to MQTT (a dedicated
// connection to the plant's broker, or the embedded broker), the devices gone from the
// embedded broker announced to the fleet, and the node started and stopped with the bridge.
import type { Closers } from './closers.js';
import type { Broker } from '../broker/broker.js';
import type { Config } from './config/config.js';
import { outputFields } from './config/output.js';
import { sparkplugSettings, type SparkplugSettings } from './config/sparkplug.js';
import type { Logger } from './logger.js';
import type { EmbeddedPort } from './mqtt/embedded.js';
import type { MqttPort } from './mqtt/port.js';
import { embeddedNodeLink, externalNodeLink } from './mqtt/sparkplug-link.js';
import { EdgeNode } from './scada/sparkplug/edge-node.js';
import type { FieldsOf } from './scada/sparkplug/model.js';
import type { ScadaState } from './store/scada-state.js';

export interface SparkplugWiring {
  config: Config;
  instanceId: string;
  /** The lease owner: names the process, not the instance. */
  owner: string;
  mqtt: MqttPort & { broker?: Broker };
  state: ScadaState;
  log: Logger;
  /** Tests: a shorter lease (default edge-node.ts DEFAULT_LEASE_TTL_MS). */
  leaseTtlMs?: number | undefined;
  closers: Closers;
}

export interface RunningSparkplug {
  readonly settings: SparkplugSettings;
  readonly node: EdgeNode;
  stop(): Promise<void>;
}

/** Undefined while Sparkplug is off. */
export async function openSparkplug(w: SparkplugWiring): Promise<RunningSparkplug | undefined> {
  const settings = sparkplugSettings(w.config);
  if (!settings) return undefined;
  const log = w.log.child({ module: 'sparkplug', group: settings.groupId, node: settings.edgeNodeId });
  const { mqtt, config } = w;
  const embedded = mqtt.mode === 'embedded' ? (mqtt as EmbeddedPort) : undefined;
  const link = embedded
    ? embeddedNodeLink(embedded.broker)
    : externalNodeLink({ ...config, brokerUrl: config.brokerUrl as string }, `${w.instanceId}-sparkplug`, log);
  const node = new EdgeNode({
    settings,
    state: w.state,
    link,
    owner: w.owner,
    fieldsOf: fieldsFrom(config),
    log,
    idleDeaths: embedded === undefined,
    ...(w.leaseTtlMs === undefined ? {} : { leaseTtlMs: w.leaseTtlMs }),
  });
  embedded?.onDeviceGone((deviceId) => {
    w.state.announce({ kind: 'gone', deviceId, atMs: Date.now() }).catch((err: unknown) => log.warn({ err, deviceId }, 'device gone not announced'));
  });
  await node.start();
  w.closers.push('sparkplug', () => node.stop());
  log.info({ primaryHost: settings.primaryHostId }, 'Sparkplug B Edge Node on');
  return { settings, node, stop: () => node.stop() };
}

/** The output fields of CONFIG_FILE's templates as read at start. */
function fieldsFrom(config: Config): FieldsOf {
  const fields = new Map(
    Object.entries(config.file.templates).flatMap(([name, template]) => (template.output ? [[name, outputFields(template.output)] as const] : [])),
  );
  return (template) => fields.get(template);
}
