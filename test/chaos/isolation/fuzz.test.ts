// The isolation fuzzer, short and with a fixed seed: two anonymous attackers send every kind
// of generated input (JSON, CBOR, templates, images, topics, MQTT 5 properties, sessions,
// subscriptions, raw packets, another device's identity) for 14 s while the innocent device
// is timed; every oracle of docs/fuzzing.md must hold. Runs the built CLI (npm run build).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { FuzzReport } from '../../../bench/fuzz/run.js';
import { REDIS_URL } from '../../helpers/redis.js';

const CLI = fileURLToPath(new URL('../../../dist/bench/fuzz/cli.js', import.meta.url));
const SEED = '2727';

function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('isolation fuzzer (fixed seed)', () => {
  it('keeps the innocent device served, the bridge up and Redis bounded under generated hostile input', { timeout: 180_000 }, async () => {
    // 10 s baseline (after 3 s warm-up), 14 s attack, then a 20 s drain (2 × TTL + 10 s).
    const run = await runCli(['--minutes', '0.4', '--seed', SEED, '--attackers', '2', '--rate', '5', '--ttl', '5', '--redis', REDIS_URL, '--json']);
    expect(run.stdout, run.stderr.slice(-3000)).not.toBe('');
    const report = JSON.parse(run.stdout) as FuzzReport;
    expect(report.seed).toBe(Number(SEED));
    expect(report.latency.baseline.requests).toBeGreaterThan(5);
    const failed = report.oracles.filter((o) => !o.pass).map((o) => `${o.name}: ${o.measured} (bound ${o.bound})`);
    expect(failed).toEqual([]);
    expect(run.code).toBe(0);
  });
});
