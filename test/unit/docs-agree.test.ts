// Statements of the docs that follow from a rule in the code or a deployment file:
// ADMIN_TOKEN's minimum length, the host ports docker-compose.yml takes, and retry_after_ms
// on every queue_full (the store's 1000 ms is checked end to end in the device contract,
// test/helpers/device-suite.ts, the overload guards' in test/e2e/overload.test.ts).
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { EnvSchema } from '../../bridge/config/variables.js';
import { helpText } from '../../bridge/ops/cli/help.js';
import { overloaded } from '../../contract/index.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');

/** The row of `variable` in a Markdown table whose first column names it. */
const row = (markdown: string, variable: string): string => markdown.split('\n').find((l) => l.startsWith(`| \`${variable}\` |`)) ?? '';

describe('the docs and the code agree on', () => {
  it("ADMIN_TOKEN's minimum length, in the configuration table, the contract and --help", () => {
    const accepts = (length: number): boolean => EnvSchema.shape.ADMIN_TOKEN.safeParse('x'.repeat(length)).success;
    const documented = [row(read('docs/configuration.md'), 'ADMIN_TOKEN'), row(read('docs/CONTRACT.md'), 'ADMIN_TOKEN'), helpText()].map((text) =>
      Number(/ADMIN_TOKEN[\s\S]*?at least (\d+) characters/.exec(text)?.[1]),
    );
    const [minimum] = documented;
    expect(documented).toEqual([minimum, minimum, minimum]);
    expect(accepts(minimum ?? 0)).toBe(true);
    expect(accepts((minimum ?? 0) - 1)).toBe(false);
  });

  it('queue_full: always with retry_after_ms, 1 to 10 s from the overload guards, as the README says', () => {
    expect(row(read('README.md'), 'queue_full')).toMatch(/always with `retry_after_ms`: 1000 for a full queue, 1000 to 10000 while shedding/);
    for (const [asked, given] of [
      [0, 1000],
      [Number.NaN, 1000],
      [2500.4, 2500],
      [60_000, 10_000],
      [Number.POSITIVE_INFINITY, 10_000],
    ] as const) {
      expect(overloaded('cause', asked).retryAfterMs, String(asked)).toBe(given);
    }
  });

  it('the host ports docker-compose.yml publishes, in its header and docs/docker.md', () => {
    const compose = parse(read('docker-compose.yml'), { merge: true }) as { services: Record<string, { ports?: string[] }> };
    const published = Object.values(compose.services).flatMap((s) => (s.ports ?? []).map((p) => p.split(':')[0] as string));
    const header = /^# Host ports it takes: ([\d ]+)\./m.exec(read('docker-compose.yml'))?.[1]?.split(' ') ?? [];
    expect(header.sort()).toEqual(published.sort());
    const doc = /It takes the host ports ([\d, and]+):/.exec(read('docs/docker.md'))?.[1]?.split(/, | and /) ?? [];
    expect(doc.sort()).toEqual(published.sort());
  });
});
