// test/unit/ stays fast and in-process: a test that starts a program (a broker, a Redis, the
// built bridge, a system tool) belongs in test/process/, test/e2e/ or test/chaos/.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const UNIT = dirname(fileURLToPath(import.meta.url));
const STARTS_A_PROGRAM =
  /node:child_process|startMosquitto|startPrivateRedis|startServiceProcess|startSentinel|helpers\/mosquitto-clients|BROKER_MODES|mode: 'external'/;

describe('test/unit/', () => {
  it('holds no test that starts a program', () => {
    const offenders = readdirSync(UNIT)
      .filter((name) => name.endsWith('.ts') && name !== 'in-process.test.ts')
      .filter((name) => STARTS_A_PROGRAM.test(readFileSync(join(UNIT, name), 'utf8')));
    expect(offenders).toEqual([]);
  });
});
