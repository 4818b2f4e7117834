// What SCADA reads: typed answers in the plant's namespace (UNS, JSON topics) and as
// Sparkplug B 3.0 tags. Topic builders, payload shapes and name rules live here so the
// bridge, scada-sim and the tests agree on them.
import { z } from 'zod';
import { ErrorCodeSchema } from './errors.js';

/** One typed value of an answer: what a template's `output` schema allows. */
export type TypedValue = boolean | number | string;
export type TypedData = Record<string, TypedValue>;

/** An `output` property name: also a tag name and a Sparkplug metric name part. */
export const FIELD_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/** A string property without maxLength holds at most this many characters (a tag, not prose). */
export const DEFAULT_STRING_MAX_LENGTH = 1024;

/** The `output` schema's property types, and the Sparkplug B type each becomes. */
export const FIELD_TYPES = ['boolean', 'number', 'integer', 'string'] as const;
export type FieldType = (typeof FIELD_TYPES)[number];
export const SPARKPLUG_TYPE_OF: Record<FieldType, 'Boolean' | 'Double' | 'Int64' | 'String'> = {
  boolean: 'Boolean',
  number: 'Double',
  integer: 'Int64',
  string: 'String',
};

/**
 * A topic level (or JSON key) made tag-safe: every character outside A-Za-z0-9_- becomes `_`
 * (so `.`, `&`, `%`, `=`, `+`, `#`, `/` and spaces never reach Ignition, HiveMQ or Node-RED).
 */
export function tagSafe(level: string): string {
  return level.replace(/[^A-Za-z0-9_-]/g, '_');
}

/** The UNS payload of one device's template: its latest answer, good or bad. */
export const UnsPayloadSchema = z.object({
  /** The typed answer; on a failure, the last good one (absent if there never was one). */
  data: z.record(z.string(), z.union([z.boolean(), z.number(), z.string()])).optional(),
  quality: z.enum(['good', 'bad']),
  /** Milliseconds since the epoch when the answer (or the failure) was published. */
  timestamp: z.number().int(),
  requestId: z.string(),
  model: z.string().optional(),
  latencyMs: z.number().int().nonnegative().optional(),
  /** On `quality: "bad"`: the reply's error code. */
  error: ErrorCodeSchema.optional(),
});
export type UnsPayload = z.infer<typeof UnsPayloadSchema>;

/** One typed answer (or failure) of a device's template, as UNS and Sparkplug publish it. */
export interface ScadaAnswer extends UnsPayload {
  deviceId: string;
  template: string;
}

/** `{root}/{place}/{deviceId}/ai/{template}`; `place` is `unassigned` for a device not in the map. */
export function unsTopic(root: string, place: string, deviceId: string, template: string): string {
  return `${root}/${place}/${tagSafe(deviceId)}/ai/${tagSafe(template)}`;
}

export const SPARKPLUG_NAMESPACE = 'spBv1.0';
export type SparkplugMessageType = 'NBIRTH' | 'NDEATH' | 'NDATA' | 'NCMD' | 'DBIRTH' | 'DDEATH' | 'DDATA' | 'DCMD';

/** `spBv1.0/{group}/{type}/{node}[/{device}]` */
export function sparkplugTopic(group: string, type: SparkplugMessageType, node: string, device?: string): string {
  const base = `${SPARKPLUG_NAMESPACE}/${group}/${type}/${node}`;
  return device === undefined ? base : `${base}/${device}`;
}

/** A primary host application's STATE topic (Sparkplug 3.0). */
export const sparkplugStateTopic = (hostId: string): string => `${SPARKPLUG_NAMESPACE}/STATE/${hostId}`;

/** The metric of one output field: `AI/{template}/{field}`; also `quality`, `requestId`, `latencyMs`. */
export const sparkplugMetricName = (template: string, field: string): string => `AI/${tagSafe(template)}/${field}`;

/** The node control metric a host writes `true` to for a rebirth. */
export const REBIRTH_METRIC = 'Node Control/Rebirth';
