// Dead letters on Redis: a request that failed upstream is listed, replayed and answered
// again through `edge-ai-bridge dlq`, the operator's tool.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { ask, sleep, startHarness, type Harness } from '../helpers/harness.js';
import { connectRedis, deletePrefix, REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const cli = fileURLToPath(new URL('../../dist/bridge/cli.js', import.meta.url));
const run = promisify(execFile);

describe('edge-ai-bridge dlq and usage', () => {
  const redis = connectRedis();
  const prefix = uniquePrefix('dlq');
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  const dlq = async (...args: string[]): Promise<string> => {
    const env = { PATH: process.env.PATH ?? '', REDIS_URL, REDIS_PREFIX: prefix };
    return (await run(process.execPath, [cli, 'dlq', ...args], { env })).stdout;
  };

  it('lists a failed request, replays it to an ok answer, and purges', async () => {
    h = await startHarness({ REDIS_URL, REDIS_PREFIX: prefix, MAX_ATTEMPTS: '2' }, { errorRate: 1 });
    const device = await h.device('cam-5');
    await device.publish('high', ask('doomed'));
    expect((await device.reply('doomed'))[0]).toMatchObject({ ok: false, error: { code: 'upstream_error' } });

    const listed = (await dlq('list')).trim().split('\n').map((l) => JSON.parse(l) as { key: string; error: { code: string } });
    expect(listed).toEqual([expect.objectContaining({ key: 'cam-5/doomed', error: expect.objectContaining({ code: 'upstream_error' }) })]);

    h.upstream.setOptions({ errorRate: 0 });
    expect(await dlq('replay', 'cam-5/doomed')).toBe('replayed 1\n');
    const [, second] = await device.reply('doomed', { count: 2 });
    expect(second).toMatchObject({ ok: true, content: 'sim answer to: question doomed' });
    expect(await dlq('list')).toBe('');

    h.upstream.setOptions({ errorRate: 1 });
    await device.publish('high', ask('doomed-2'));
    await device.reply('doomed-2');
    expect(await dlq('purge')).toBe('purged 1\n');
    expect(await dlq('list')).toBe('');

    // `usage` reads the same deployment: the one answered call is counted for its device, once
    // the instance has written its usage (once a second).
    const env = { PATH: process.env.PATH ?? '', REDIS_URL, REDIS_PREFIX: prefix };
    type Report = { byDevice: Record<string, { requests: number; promptTokens: number }> };
    let report: Report = { byDevice: {} };
    for (let tries = 0; tries < 20 && report.byDevice['cam-5'] === undefined; tries += 1) {
      if (tries > 0) await sleep(250);
      report = JSON.parse((await run(process.execPath, [cli, 'usage', '1'], { env })).stdout) as Report;
    }
    expect(report.byDevice['cam-5']?.requests).toBe(1);
    expect(report.byDevice['cam-5']?.promptTokens).toBe((second?.ok && second.usage?.prompt_tokens) || -1);
  });
});
