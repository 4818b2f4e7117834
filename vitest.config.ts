import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: 'forks',
    // The JSON report is what .ci/run counts for its closing "N passed, N failed" line.
    reporters: ['default', 'json'],
    outputFile: { json: '.vitest-report.json' },
  },
});
