// The Sparkplug B Edge Node's settings, from SPARKPLUG_* (variables.ts). A fleet sharing Redis
// is ONE Edge Node, so its node id must not come from INSTANCE_ID, which differs per instance.
import type { Config } from './config.js';

export interface SparkplugSettings {
  groupId: string;
  edgeNodeId: string;
  primaryHostId: string | undefined;
  /** Plant's broker: a device unanswered for this long gets its DDEATH. */
  deviceIdleMs: number;
}

export const DEFAULT_EDGE_NODE_ID = 'edge-ai-bridge';

type SparkplugConfig = Pick<
  Config,
  'sparkplugGroupId' | 'sparkplugEdgeNodeId' | 'sparkplugPrimaryHostId' | 'sparkplugDeviceIdleS' | 'redis' | 'redisPrefix' | 'instanceId'
>;

/** Undefined while SPARKPLUG_GROUP_ID is unset (Sparkplug off). */
export function sparkplugSettings(config: SparkplugConfig): SparkplugSettings | undefined {
  if (config.sparkplugGroupId === undefined) return undefined;
  return {
    groupId: config.sparkplugGroupId,
    edgeNodeId: config.sparkplugEdgeNodeId ?? defaultEdgeNodeId(config),
    primaryHostId: config.sparkplugPrimaryHostId,
    deviceIdleMs: config.sparkplugDeviceIdleS * 1000,
  };
}

/**
 * With Redis the instances are one deployment: its REDIS_PREFIX names the node (the same on
 * every instance). Alone, the instance's own id, so two unshared bridges are two nodes.
 */
function defaultEdgeNodeId(config: SparkplugConfig): string {
  const id = config.redis === undefined ? (config.instanceId ?? DEFAULT_EDGE_NODE_ID) : config.redisPrefix;
  // REDIS_PREFIX and INSTANCE_ID allow none of + # /, so the id is valid as it is.
  return id;
}
