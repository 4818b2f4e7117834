// Topics of the contract: priorities, device and request ids, and the topic names.
import { z } from 'zod';
import { DEVICE_ID_PATTERN, PRIORITIES, type Priority } from './names.js';

export * from './names.js';

export const CONTRACT_VERSION = 1;

export const PrioritySchema = z.enum(PRIORITIES);

/** A client's device id is its client id up to the first `.`. */
export function deviceIdOfClientId(clientId: string): string | null {
  const dot = clientId.indexOf('.');
  const id = dot === -1 ? clientId : clientId.slice(0, dot);
  return DEVICE_ID_PATTERN.test(id) ? id : null;
}

export type InferTopic =
  | { kind: 'infer'; deviceId: string; priority: Priority }
  /** The template and request id, when the topic names them (else the MQTT 5 user properties must). */
  | { kind: 'image'; deviceId: string; priority: Priority; template: string | undefined; requestId: string | undefined }
  | { kind: 'bad_priority'; deviceId: string; segment: string }
  /** An image topic the contract cannot read: answered `invalid_request` with `problem`. */
  | { kind: 'bad_image_topic'; deviceId: string; problem: string; requestId: string | undefined };

const IMAGE_TOPIC_SHAPE =
  'an image topic is devices/{id}/image/{priority}/{template}/{requestId}, or devices/{id}/image/{priority} with the MQTT 5 user properties template and id';

/**
 * Parses `devices/{deviceId}/infer/{priority}` and `devices/{deviceId}/image/{priority}` (with
 * `/{template}/{requestId}` or without); null when the topic is not a request topic. Any other
 * topic under a device's `image/` is a bad image topic, so the camera is told, not ignored.
 */
export function parseInferTopic(topic: string): InferTopic | null {
  const parts = topic.split('/');
  const kind = parts[2];
  if (parts[0] !== 'devices' || (kind !== 'infer' && kind !== 'image')) return null;
  const deviceId = parts[1] ?? '';
  if (!DEVICE_ID_PATTERN.test(deviceId)) return null;
  if (kind === 'infer' && parts.length !== 4) return null;
  const requestId = parts[5];
  if (kind === 'image' && parts.length !== 4 && parts.length !== 6) return { kind: 'bad_image_topic', deviceId, problem: IMAGE_TOPIC_SHAPE, requestId };
  const segment = parts[3] ?? '';
  const priority = PrioritySchema.safeParse(segment);
  if (!priority.success) {
    if (kind === 'infer') return { kind: 'bad_priority', deviceId, segment };
    return { kind: 'bad_image_topic', deviceId, problem: unknownPriority(segment), requestId };
  }
  if (kind === 'infer') return { kind: 'infer', deviceId, priority: priority.data };
  return { kind: 'image', deviceId, priority: priority.data, template: parts[4], requestId };
}

/** A device's segment is echoed in its reply and logs: at most 32 characters of it. */
export const unknownPriority = (segment: string): string =>
  `unknown priority "${segment.length > 32 ? `${segment.slice(0, 32)}…` : segment}" (expected critical, high, normal or low)`;
