// `npm run test:times [report.json] [--save]`: what the last `vitest run` cost, read from its
// JSON report (.vitest-report.json): the wall time, the files' own times summed, and the
// slowest files and tests. The suite's time is a figure to watch like any other. --save writes
// each file's time to test/durations.json, the order the next runs start the files in.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The parts of vitest's JSON report read here. */
export interface VitestReport {
  startTime: number;
  numTotalTests: number;
  numFailedTests: number;
  testResults: Array<{
    name: string;
    startTime: number;
    endTime: number;
    assertionResults: Array<{ fullName: string; duration?: number | null }>;
  }>;
}

export const DURATIONS_FILE = 'test/durations.json';

const relative = (name: string, root: string): string => (name.startsWith(`${root}/`) ? name.slice(root.length + 1) : name);

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`.padStart(8);

/** The report as a few lines: the totals, then the `top` slowest files and tests. */
export function testTimes(report: VitestReport, root: string, top = 10): string {
  const files = report.testResults.map((f) => ({
    name: relative(f.name, root),
    ms: f.endTime - f.startTime,
    tests: f.assertionResults,
  }));
  const end = Math.max(report.startTime, ...report.testResults.map((f) => f.endTime));
  const summed = files.reduce((sum, f) => sum + f.ms, 0);
  const tests = files.flatMap((f) => f.tests.map((t) => ({ name: `${f.name} > ${t.fullName}`, ms: t.duration ?? 0 })));
  const slowest = <T extends { ms: number }>(xs: T[]): T[] => [...xs].sort((a, b) => b.ms - a.ms).slice(0, top);
  return [
    `vitest: ${report.numTotalTests} tests (${report.numFailedTests} failed) in ${files.length} files, ` +
      `${seconds(end - report.startTime).trim()} wall; the files' own times sum to ${seconds(summed).trim()}`,
    `slowest files:`,
    ...slowest(files).map((f) => `${seconds(f.ms)}  ${f.name} (${f.tests.length} test${f.tests.length === 1 ? '' : 's'})`),
    `slowest tests:`,
    ...slowest(tests).map((t) => `${seconds(t.ms)}  ${t.name}`),
  ].join('\n');
}

/** Each file's time in seconds (one decimal), by path from `root`, the paths in order. */
export function fileDurations(report: VitestReport, root: string): Record<string, number> {
  const rows = report.testResults.map((f) => [relative(f.name, root), Math.round((f.endTime - f.startTime) / 100) / 10] as const);
  return Object.fromEntries(rows.sort(([a], [b]) => (a < b ? -1 : 1)));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const path = args.find((a) => !a.startsWith('--')) ?? '.vitest-report.json';
  const report = JSON.parse(readFileSync(path, 'utf8')) as VitestReport;
  console.log(testTimes(report, process.cwd()));
  if (args.includes('--save')) writeFileSync(DURATIONS_FILE, `${JSON.stringify(fileDurations(report, process.cwd()), null, 2)}\n`);
}
