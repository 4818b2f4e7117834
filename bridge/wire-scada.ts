// The composition root's SCADA part: builds the outputs (UNS, the Sparkplug hand-over) from
// the configuration, or nothing when neither is on.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Publish } from '../contract/index.js';
import type { Closers } from './closers.js';
import type { Config } from './config/config.js';
import type { Output } from './config/output.js';
import type { Logger } from './logger.js';
import { ScadaOutputs } from './scada/outputs.js';
import { UnsPublisher } from './scada/uns.js';
import type { ScadaState } from './store/scada-state.js';

/** How long a stop waits for answers still on their way to SCADA before the broker closes. */
const STOP_WAIT_MS = 2000;

export interface ScadaWiring {
  config: Pick<Config, 'file' | 'scadaMaxTags'>;
  state: ScadaState;
  publish: Publish;
  /** The live templates (SIGHUP replaces them). */
  templates: { output(name: string): Output | undefined };
  logger: Logger;
  closers: Closers;
  /** The Sparkplug Edge Node is on: answers are announced to its publisher. */
  sparkplug?: boolean;
}

/** What observers may read of the embedded broker besides the contract's topics: the UNS root. */
export const scadaObserverTopics = (config: Pick<Config, 'file'>): string[] => (config.file.uns ? [`${config.file.uns.root}/#`] : []);

/** The answer sink for Results, or undefined when neither UNS nor Sparkplug is configured. */
export function wireScada({ config, state, publish, templates, logger, closers, sparkplug = false }: ScadaWiring): ScadaOutputs | undefined {
  const unsConfig = config.file.uns;
  if (unsConfig === undefined && !sparkplug) return undefined;
  const log = logger.child({ module: 'scada' });
  const uns = unsConfig === undefined ? undefined : new UnsPublisher({ config: unsConfig, publish, maxTopics: config.scadaMaxTags });
  const outputs = new ScadaOutputs({ state, uns, sparkplug, hasOutput: (name) => templates.output(name) !== undefined, logger: log });
  closers.push('scada outputs', () => Promise.race([outputs.idle(), sleep(STOP_WAIT_MS, undefined, { ref: false })]));
  log.info({ unsRoot: unsConfig?.root, places: Object.keys(unsConfig?.devices ?? {}).length, sparkplug }, 'SCADA outputs on');
  return outputs;
}
