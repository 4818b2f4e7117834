// Latency histograms the dashboard merges across instances: HDR histograms (hdr-histogram-js,
// already the load simulator's) in microseconds, shipped between instances compressed.
import { createRequire } from 'node:module';
import type * as Hdr from 'hdr-histogram-js';
import type { Percentiles } from './model.js';

export type Histogram = Hdr.Histogram;

// Loaded with the first histogram (the first answer), not by every start.
let loaded: typeof Hdr | undefined;
const hdr = (): typeof Hdr => (loaded ??= createRequire(import.meta.url)('hdr-histogram-js') as typeof Hdr);

export const newHistogram = (): Histogram => hdr().build({ bitBucketSize: 32, autoResize: true, numberOfSignificantValueDigits: 2, useWebAssembly: false });

export function recordMs(h: Histogram, ms: number): void {
  h.recordValue(Math.max(0, Math.round(ms * 1000)));
}

/** Compressed for a report; null when empty. */
export function encode(h: Histogram): string | null {
  return h.totalCount === 0 ? null : hdr().encodeIntoCompressedBase64(h);
}

/** The merge of encoded histograms (nulls skipped) as p50/p99 in ms; null when all are empty. */
export function mergedPercentiles(encoded: Array<string | null | undefined>): Percentiles {
  const merged = newHistogram();
  for (const e of encoded) if (e) merged.add(hdr().decodeFromCompressedBase64(e, 32, false));
  if (merged.totalCount === 0) return null;
  const ms = (us: number): number => Math.round(us / 100) / 10;
  return { p50: ms(merged.getValueAtPercentile(50)), p99: ms(merged.getValueAtPercentile(99)) };
}
