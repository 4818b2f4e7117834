// The order test files are handed to vitest's workers in: the longest first, so the run does
// not end waiting on one long file started late, by the times kept in test/durations.json
// (`npm run test:times -- --save` after a full run); files not listed there first, as vitest
// does. Most files wait on sockets, so the suite runs more workers than cores; but the chaos
// files assert wall-clock bounds (a takeover within UPSTREAM_TIMEOUT_MS + 5 s) over processes
// they spawn, and several at once starve each other's children of CPU: they are spread evenly
// through the run instead of started together.
import { existsSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const DURATIONS = 'test/durations.json';

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

/** `paths` longest first by `seconds`, those without a time before all others, ties by path. */
export function longestFirst(paths: string[], seconds: Record<string, number>): string[] {
  const time = (p: string): number => seconds[p] ?? Infinity;
  return [...paths].sort((a, b) => time(b) - time(a) || (a < b ? -1 : 1));
}

export default class SpreadChaosSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const seconds = existsSync(DURATIONS) ? (JSON.parse(readFileSync(DURATIONS, 'utf8')) as Record<string, number>) : {};
    const byPath = new Map(files.map((spec) => [relative(process.cwd(), spec.moduleId), spec]));
    const sorted = longestFirst([...byPath.keys()], seconds).map((p) => byPath.get(p) as TestSpecification);
    return spreadEvenly(
      sorted.filter(isChaos),
      sorted.filter((spec) => !isChaos(spec)),
    );
  }
}
