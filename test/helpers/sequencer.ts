// The order test files are handed to vitest's workers in. Most files wait on sockets, so the
// suite runs more workers than cores; the chaos files assert wall-clock bounds (a takeover
// within UPSTREAM_TIMEOUT_MS + 5 s) over processes they spawn, and several of them at once
// starve each other's children of CPU. They are spread evenly through the run instead of
// started together, longest first, so few of them share the machine at a time.
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const isChaos = (spec: TestSpecification): boolean => spec.moduleId.includes('/test/chaos/');

/** `spread` placed evenly among `rest`, both kept in their order, the first of `spread` first. */
export function spreadEvenly<T>(spread: T[], rest: T[]): T[] {
  const out: T[] = [];
  const total = spread.length + rest.length;
  let r = 0;
  spread.forEach((item, i) => {
    const at = Math.floor((i * total) / spread.length);
    while (out.length < at && r < rest.length) out.push(rest[r++] as T);
    out.push(item);
  });
  return [...out, ...rest.slice(r)];
}

export default class SpreadChaosSequencer extends BaseSequencer {
  // vitest's order: files that failed last time, then the longest by its cached durations, then unknown ones by size.
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    return spreadEvenly(sorted.filter(isChaos), sorted.filter((spec) => !isChaos(spec)));
  }
}
