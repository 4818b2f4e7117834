// The contract's names without a schema library: priorities, id patterns and topic builders.
// Device code (client/) imports this file at run time, so it needs nothing but mqtt.

export const PRIORITIES = ['critical', 'high', 'normal', 'low'] as const;
export type Priority = (typeof PRIORITIES)[number];

export const DEVICE_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,64}$/;
/** Template names: what a request's `template` and an image topic's template segment may hold. */
export const TEMPLATE_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

export const topics = {
  infer: (deviceId: string, priority: Priority): string => `devices/${deviceId}/infer/${priority}`,
  result: (deviceId: string): string => `devices/${deviceId}/result`,
  /** Chunks of a `"stream": true` request's text, as the upstream writes it. */
  stream: (deviceId: string): string => `devices/${deviceId}/stream`,
  status: (instanceId: string): string => `bridge/${instanceId}/status`,
  metrics: (instanceId: string): string => `bridge/${instanceId}/metrics`,
  inferWildcard: 'devices/+/infer/+',
  /** A raw camera image: `devices/{id}/image/{priority}/{template}/{requestId}` (MQTT 5 may name the last two in user properties). */
  image: (deviceId: string, priority: Priority, template: string, requestId: string): string =>
    `devices/${deviceId}/image/${priority}/${template}/${requestId}`,
  imageWildcard: 'devices/+/image/#',
};
