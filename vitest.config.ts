import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import SpreadChaosSequencer from './test/helpers/sequencer.js';

/** Files that need a CPU to themselves: they run after the rest, one at a time. */
const ALONE = [
  // Blocks its own event loop on purpose and expects to be shed: on a CPU shared with other
  // workers, the bridge rightly reads the late loop as another program's doing and sheds nothing.
  'test/e2e/overload.test.ts',
  // Asserts the contract's takeover bound (UPSTREAM_TIMEOUT_MS + 5 s) over 20 restarts of the
  // built bridge, with about a second to spare on an idle machine: restarts that wait for a
  // CPU beside three other workers overran it (7.7–8.6 s) in half the parallel runs.
  'test/chaos/crash-loop.test.ts',
];

export default defineConfig({
  test: {
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: 'forks',
    // A worker imports the bridge's modules once for all the files it runs, not once per file
    // (most of the suite's CPU went there). Tests share no state through modules: each makes its
    // own ports, key prefixes, stores and bridges.
    isolate: false,
    sequence: { sequencer: SpreadChaosSequencer },
    projects: [
      {
        extends: true,
        test: {
          name: 'suite',
          include: ['test/**/*.test.ts'],
          exclude: ALONE,
          // Most files wait on sockets and child processes, not on the CPU: twice as many workers
          // as cores (VITEST_MAX_WORKERS overrides it).
          maxWorkers: Math.max(2, availableParallelism() * 2),
        },
      },
      { extends: true, test: { name: 'alone', include: ALONE, maxWorkers: 1, sequence: { groupOrder: 1 } } },
    ],
    // The JSON report is what .ci/run counts for its closing "N passed, N failed" line.
    reporters: ['default', 'json'],
    outputFile: { json: '.vitest-report.json' },
  },
});
