// `npm run test:times [report.json]`: what the last `vitest run` cost, read from its JSON
// report (.vitest-report.json): the wall time, the files' own times summed, and the slowest
// files and tests. The suite's time is a figure to watch like any other.
import { readFileSync } from 'node:fs';
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

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`.padStart(8);

/** The report as a few lines: the totals, then the `top` slowest files and tests. */
export function testTimes(report: VitestReport, root: string, top = 10): string {
  const files = report.testResults.map((f) => ({
    name: f.name.startsWith(`${root}/`) ? f.name.slice(root.length + 1) : f.name,
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

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const path = process.argv[2] ?? '.vitest-report.json';
  const report = JSON.parse(readFileSync(path, 'utf8')) as VitestReport;
  console.log(testTimes(report, process.cwd()));
}
