// Budgets end to end: a device over its daily token budget is answered budget_exceeded with
// retry_after_ms until the budget's midnight, others are not; a failed call gives its
// reservation back; `critical` passes an exempting budget; /v1/budgets shows the use.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { periodAt } from '../../bridge/intake/budget-period.js';
import { ask, startHarness, type Harness } from '../helpers/harness.js';
import { connectRedis, deletePrefix, REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { tempDir } from '../helpers/security.js';

const cli = fileURLToPath(new URL('../../dist/bridge/cli.js', import.meta.url));
const run = promisify(execFile);

const TOKEN = 'budget-test-token';
// Distinct questions (a cached answer costs no budget), max_tokens 10.
const small = (id: string): Record<string, unknown> => ask(id, `q ${id}`, { max_tokens: 10 });

describe('budgets', () => {
  const dir = tempDir('eab-budgets-');
  let h: Harness;
  beforeAll(async () => {
    const configFile = join(dir.path, 'config.json');
    writeFileSync(
      configFile,
      JSON.stringify({
        budgets: {
          timeZone: 'Europe/Berlin',
          limits: [
            { name: 'per-device', per: 'device', devices: 'cam-*', period: 'day', tokens: 30, exemptCritical: true },
            { name: 'fleet', per: 'fleet', period: 'month', tokens: 1_000_000 },
          ],
        },
      }),
    );
    h = await startHarness({ CONFIG_FILE: configFile, ADMIN_TOKEN: TOKEN, MAX_ATTEMPTS: '2' }, { latencyMs: 5 });
  });
  afterAll(async () => {
    await h.close();
    dir.remove();
  });

  it('refuses a device over its budget until midnight in the zone, and serves the others', async () => {
    const cam = await h.device('cam-1');
    const other = await h.device('cam-2');
    // One request is estimated at about 30 tokens (its size / 4, + max_tokens 10): the first
    // fits in 30; answered, it counts the few the simulator reports, and the next estimate
    // does not fit beside them.
    await cam.publish('normal', small('b1'));
    expect((await cam.reply('b1'))[0]?.ok).toBe(true);
    await cam.publish('normal', small('b2'));
    expect((await cam.reply('b2'))[0]).toMatchObject({ ok: false, error: { code: 'budget_exceeded' } });
    const refused = cam.replies.find((r) => r.ok === false);
    if (refused?.ok !== false) throw new Error('expected a refusal');
    const untilMidnight = periodAt('day', 'Europe/Berlin', Date.now()).endMs - Date.now();
    expect(refused.error.retry_after_ms).toBeGreaterThan(untilMidnight - 60_000);
    expect(refused.error.retry_after_ms).toBeLessThanOrEqual(untilMidnight + 5000);
    expect(refused.error.message).toMatch(/^budget "per-device" for cam-1 is used up until /);
    await other.publish('normal', small('o1'));
    expect((await other.reply('o1'))[0]?.ok).toBe(true);
    // critical is exempt from the per-device budget.
    await cam.publish('critical', small('urgent'));
    expect((await cam.reply('urgent'))[0]?.ok).toBe(true);
  });

  it('gives a failed call its reservation back', async () => {
    const cam = await h.device('cam-3');
    h.upstream.script({ status: 500 }, { status: 500 }); // both attempts fail
    await cam.publish('normal', small('fails'));
    expect((await cam.reply('fails'))[0]).toMatchObject({ ok: false, error: { code: 'upstream_error' } });
    // The reply leaves before the completion releases the reservation: ask until it has.
    type Report = { timeZone: string; budgets: Array<{ name: string; use: Array<{ subject: string; reserved: number }> }> };
    const read = async (): Promise<Report> =>
      (await (await fetch(`http://127.0.0.1:${h.bridge.httpPort}/v1/budgets`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as Report;
    let report = await read();
    const cam3 = (r: Report) => r.budgets.find((b) => b.name === 'per-device')?.use.find((u) => u.subject === 'cam-3');
    for (let tries = 0; tries < 20 && cam3(report)?.reserved !== 0; tries += 1) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      report = await read();
    }
    const device = report.budgets.find((b) => b.name === 'per-device');
    expect(device?.use.find((u) => u.subject === 'cam-3')).toEqual({ subject: 'cam-3', used: 0, reserved: 0 });
    expect(device).toMatchObject({ per: 'device', unit: 'tokens', limit: 30, exemptCritical: true });
    expect(report.timeZone).toBe('Europe/Berlin');
    const metrics = await (await fetch(`http://127.0.0.1:${h.bridge.httpPort}/metrics`)).text();
    expect(metrics).toMatch(/^edge_ai_bridge_budget_refusals_total\{budget="per-device"\} 1$/m);
    expect(metrics).toMatch(/^edge_ai_bridge_budget_fullest_ratio\{budget="per-device"\} [0-9.]+$/m);
    expect(metrics).toMatch(/^edge_ai_bridge_budget_used_tokens\{budget="fleet"\} [1-9][0-9.]*$/m);
    expect(metrics).not.toMatch(/^edge_ai_bridge_budget_used_usd\{/m);
    // Its 30 tokens are all there: the next request is answered.
    await cam.publish('normal', small('n1'));
    expect((await cam.reply('n1'))[0]?.ok).toBe(true);
  });
});

describe('budgets on Redis, seen with `edge-ai-bridge budgets`', () => {
  const dir = tempDir('eab-budgets-redis-');
  const redis = connectRedis();
  const prefix = uniquePrefix('budgets');
  afterAll(async () => {
    await deletePrefix(redis, prefix);
    redis.disconnect();
    dir.remove();
  });

  const settled = (report: { budgets: Array<{ use: Array<{ reserved: number }> }> }): boolean =>
    report.budgets.length > 0 && report.budgets.every((b) => b.use.every((u) => u.reserved === 0));

  it('counts what an answered request used, for its device and the fleet', async () => {
    const configFile = join(dir.path, 'config.json');
    const limits = [
      { name: 'per-device', per: 'device', period: 'day', tokens: 10_000 },
      { name: 'fleet', per: 'fleet', period: 'month', tokens: 1_000_000 },
    ];
    writeFileSync(configFile, JSON.stringify({ budgets: { limits } }));
    const env = { CONFIG_FILE: configFile, REDIS_URL, REDIS_PREFIX: prefix };
    const h = await startHarness(env);
    try {
      const cam = await h.device('cam-9');
      await cam.publish('normal', small('r1'));
      const [reply] = await cam.reply('r1');
      if (reply?.ok !== true) throw new Error('expected an answer');
      const used = (reply.usage?.prompt_tokens ?? 0) + (reply.usage?.completion_tokens ?? 0);
      // The reply leaves before its completion settles the reservation: ask until it has.
      type Report = { budgets: Array<{ name: string; use: Array<{ reserved: number }> }> };
      let report: Report = { budgets: [] };
      for (let tries = 0; tries < 10 && !settled(report); tries += 1) {
        const { stdout } = await run(process.execPath, [cli, 'budgets', '--json'], { env: { PATH: process.env.PATH ?? '', ...env } });
        report = JSON.parse(stdout) as Report;
      }
      expect(report.budgets.map((b) => [b.name, b.use])).toEqual([
        ['per-device', [{ subject: 'cam-9', used, reserved: 0 }]],
        ['fleet', [{ subject: '*', used, reserved: 0 }]],
      ]);
    } finally {
      await h.close();
    }
  });
});
