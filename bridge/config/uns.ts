// CONFIG_FILE `uns`: where answers go in the plant's namespace (Unified Namespace). `root` is
// the plant's prefix, `devices` maps a device id or `*` pattern to its place under it:
//   { "root": "acme/plant-1", "devices": { "press-*": "stamping/line-3", "cam-7": "paint/line-1/cell-2" } }
// Root and places are refused at load unless every level is tag-safe, so what SCADA reads is
// exactly what the file says.
import { z } from 'zod';
import { DEVICE_PATTERN, matchesDevice } from './fair-share.js';

/** A device not in the map goes under this place. */
export const UNASSIGNED_PLACE = 'unassigned';
/** First levels the bridge's own topics use: a root there would mix tags with devices' topics. */
const RESERVED_FIRST_LEVELS = ['devices', 'bridge'];
const LEVEL = /^[A-Za-z0-9_-]+$/;
const MAX_PATH_LENGTH = 256;
const MAX_DEVICE_ENTRIES = 10_000;

/** Why `path` is not a UNS topic path, or undefined when it is one. */
export function topicPathProblem(path: string): string | undefined {
  if (path.length === 0) return 'must not be empty';
  if (path.length > MAX_PATH_LENGTH) return `must be at most ${MAX_PATH_LENGTH} characters`;
  if (/[+#]/.test(path)) return 'must not hold MQTT wildcards (+ or #)';
  if (path.startsWith('$')) return 'must not start with $ (topics the broker keeps for itself)';
  if (path.startsWith('/') || path.endsWith('/') || path.includes('//')) return 'must not have an empty level (a leading, trailing or double /)';
  const bad = path.split('/').find((level) => !LEVEL.test(level));
  if (bad !== undefined) return `level "${bad}" has characters outside A-Za-z0-9_- (levels are separated by /)`;
  return undefined;
}

const TopicPathSchema = z.string().superRefine((path, ctx) => {
  const problem = topicPathProblem(path);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

export const UnsSchema = z
  .strictObject({
    /** The plant's prefix, e.g. `acme/plant-1`: every tag topic starts with it. */
    root: TopicPathSchema.refine((root) => !RESERVED_FIRST_LEVELS.includes(root.split('/')[0] ?? ''), {
      message: `must not start with ${RESERVED_FIRST_LEVELS.join(' or ')} (the bridge's own topics)`,
    }),
    /** Device id or `*` pattern → its place under the root, e.g. `stamping/line-3`. */
    devices: z.record(z.string(), TopicPathSchema).default({}),
  })
  .superRefine((uns, ctx) => {
    const keys = Object.keys(uns.devices);
    if (keys.length > MAX_DEVICE_ENTRIES)
      ctx.addIssue({ code: 'custom', path: ['devices'], message: `must map at most ${MAX_DEVICE_ENTRIES} devices or patterns` });
    for (const key of keys) {
      if (!DEVICE_PATTERN.test(key))
        ctx.addIssue({ code: 'custom', path: ['devices', key], message: 'a device id, or a pattern of A-Za-z0-9_.:- and * (any characters)' });
    }
  });

export type UnsConfig = z.infer<typeof UnsSchema>;

/**
 * A device's place: its own id's entry, else the longest pattern that matches it (the most
 * specific; of equal lengths, the first in the file), else `unassigned`.
 */
export function placeOf(devices: UnsConfig['devices'], deviceId: string): string {
  const own = devices[deviceId];
  if (own !== undefined) return own;
  let best: { pattern: string; place: string } | undefined;
  for (const [pattern, place] of Object.entries(devices)) {
    if (!pattern.includes('*') || !matchesDevice(pattern, deviceId)) continue;
    if (best === undefined || pattern.length > best.pattern.length) best = { pattern, place };
  }
  return best?.place ?? UNASSIGNED_PLACE;
}
