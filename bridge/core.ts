// The parts the composition root wires every later part to (app.ts and its wire-*.ts helpers).
import type { Broker } from '../broker/broker.js';
import type { Closers } from './closers.js';
import type { Config } from './config/config.js';
import type { LiveParts } from './config/reload.js';
import type { Coordination } from './coordination.js';
import type { Templates } from './intake/templates.js';
import type { Logger } from './logger.js';
import type { MqttPort } from './mqtt/port.js';
import type { ProviderChain } from './upstream/chain.js';
import type { RunningSparkplug } from './wire-sparkplug.js';

export interface Identity {
  instanceId: string;
  /**
   * Leases name the process, not the instance: a restarted INSTANCE_ID must never renew or
   * complete what its predecessor (perhaps only paused) still holds.
   */
  owner: string;
  since: string;
}

/** The parts every later part is wired to. */
export interface Core {
  config: Config & { upstreamUrl: string };
  identity: Identity;
  log: Logger;
  closers: Closers;
  coordination: Coordination;
  upstream: ProviderChain;
  mqtt: MqttPort & { broker?: Broker };
  /** The Sparkplug B Edge Node (SPARKPLUG_GROUP_ID), undefined while off. */
  sparkplug: RunningSparkplug | undefined;
  /** What SIGHUP replaces: CONFIG_FILE's templates (prepared for rendering), weights and budgets. */
  live: { templates: Templates } & Omit<LiveParts, 'templates'>;
}
