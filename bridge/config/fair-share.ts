// Fair share within a priority class: each device's weight (CONFIG_FILE `weights`: a device id
// or a pattern with `*` → weight, default 1), and what a request is charged against its
// device's counter: tokens in + 2 × tokens out, over the weight.
import { z } from 'zod';

export const DEVICE_PATTERN = /^[A-Za-z0-9_.:*-]{1,128}$/;

export const WeightsSchema = z
  .record(z.string(), z.number().positive().max(1000))
  // Checked here rather than by the key's schema, whose message zod replaces with its own.
  .superRefine((weights, ctx) => {
    for (const key of Object.keys(weights)) {
      if (!DEVICE_PATTERN.test(key))
        ctx.addIssue({ code: 'custom', path: [key], message: 'a device id, or a pattern of A-Za-z0-9_.:- and * (any characters)' });
    }
  })
  .default({});

export type Weights = z.infer<typeof WeightsSchema>;

/** A device's weight: its own id's entry, else the first pattern (in file order) it matches, else 1. */
export function weightOf(weights: Weights, deviceId: string): number {
  const own = weights[deviceId];
  if (own !== undefined) return own;
  for (const [pattern, weight] of Object.entries(weights)) {
    if (pattern.includes('*') && matchesDevice(pattern, deviceId)) return weight;
  }
  return 1;
}

/** Whether a device id or `*` pattern names `id`. */
export function matchesDevice(pattern: string, id: string): boolean {
  if (!pattern.includes('*')) return pattern === id;
  let compiled = PATTERNS.get(pattern);
  if (!compiled) {
    const escape = (s: string): string => s.replace(/[.]/g, '\\.');
    PATTERNS.set(pattern, (compiled = new RegExp(`^${pattern.split('*').map(escape).join('.*')}$`)));
  }
  return compiled.test(id);
}

/** Compiled once: a pattern is matched on every request of a device it may name. */
const PATTERNS = new Map<string, RegExp>();

/** The charge against a device's counter: tokens in + 2 × tokens out, over its weight. */
export const fairCharge = (promptTokens: number, completionTokens: number, weight: number): number => (promptTokens + 2 * completionTokens) / weight;
