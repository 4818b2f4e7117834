import { describe, expect, it } from 'vitest';
import { fileDurations, testTimes, type VitestReport } from '../../bench/test-times.js';

const report: VitestReport = {
  startTime: 1_000,
  numTotalTests: 3,
  numFailedTests: 1,
  testResults: [
    { name: '/repo/test/unit/a.test.ts', startTime: 2_000, endTime: 3_500, assertionResults: [{ fullName: 'a one', duration: 1_400 }] },
    {
      name: '/repo/test/e2e/b.test.ts',
      startTime: 2_000,
      endTime: 12_000,
      assertionResults: [
        { fullName: 'b one', duration: 9_000 },
        { fullName: 'b two', duration: null },
      ],
    },
  ],
};

describe('testTimes', () => {
  it('gives the wall time from the run start to the last file end, and the files slowest first', () => {
    const lines = testTimes(report, '/repo', 1).split('\n');
    expect(lines[0]).toBe("vitest: 3 tests (1 failed) in 2 files, 11.0 s wall; the files' own times sum to 11.5 s");
    expect(lines.slice(1)).toEqual(['slowest files:', '  10.0 s  test/e2e/b.test.ts (2 tests)', 'slowest tests:', '   9.0 s  test/e2e/b.test.ts > b one']);
  });

  it('keeps the time of each file in seconds by path, for the order of the next runs', () => {
    expect(fileDurations(report, '/repo')).toEqual({ 'test/e2e/b.test.ts': 10, 'test/unit/a.test.ts': 1.5 });
  });
});
