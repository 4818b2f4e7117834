// Dead letters on Redis: a request that failed upstream is listed (a page at a time), shown,
// replayed and answered again through `edge-ai-bridge dlq`, the operator's tool.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { ask, startHarness, type Harness } from '../helpers/harness.js';
import { connectRedis, deletePrefix, REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { readUntil } from '../helpers/wait.js';

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

    const listed = (await dlq('list', '--json'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { key: string; error: { code: string } });
    expect(listed).toEqual([expect.objectContaining({ key: 'cam-5/doomed', error: expect.objectContaining({ code: 'upstream_error' }) })]);
    const shown = JSON.parse(await dlq('show', 'cam-5/doomed')) as { key: string; request: { messages: unknown[] } };
    expect(shown).toMatchObject({ key: 'cam-5/doomed', request: { messages: [{ role: 'user', content: 'question doomed' }] } });
    await expect(dlq('show', 'cam-5', 'nope')).rejects.toMatchObject({ code: 1 });
    await expect(dlq('list', '--limit', '0')).rejects.toMatchObject({ code: 2 });

    h.upstream.setOptions({ errorRate: 0 });
    expect(await dlq('replay', 'cam-5/doomed')).toBe('replayed 1\n');
    const [, second] = await device.reply('doomed', { count: 2 });
    expect(second).toMatchObject({ ok: true, content: 'sim answer to: question doomed' });
    expect(await dlq('list', '--json')).toBe('');

    h.upstream.setOptions({ errorRate: 1 });
    await device.publish('high', ask('doomed-2'));
    await device.reply('doomed-2');
    await device.publish('high', ask('doomed-3'));
    await device.reply('doomed-3');
    // Read a page at a time; --limit stops early.
    expect(
      (await dlq('list', '--json'))
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { key: string }).key)
        .sort(),
    ).toEqual(['cam-5/doomed-2', 'cam-5/doomed-3']);
    expect((await dlq('list', '--limit', '1', '--json')).trim().split('\n')).toHaveLength(1);
    // A table for the operator: a header and one aligned row per entry.
    expect((await dlq('list')).trim().split('\n')).toEqual([
      expect.stringMatching(/^key +priority +at \(UTC\) +error +attempts +message$/),
      expect.stringMatching(/^cam-5\/doomed-[23] +high +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +upstream_error +\d+ +out of attempts/),
      expect.stringMatching(/^cam-5\/doomed-[23] +high /),
    ]);
    await expect(dlq('purge')).rejects.toMatchObject({ code: 2 });
    expect(await dlq('purge', '--yes')).toBe('purged 2\n');
    expect(await dlq('list', '--json')).toBe('');

    // `usage` reads the same deployment: the one answered call is counted for its device, once
    // the instance has written its usage (once a second).
    const env = { PATH: process.env.PATH ?? '', REDIS_URL, REDIS_PREFIX: prefix };
    type Report = { byDevice: Record<string, { requests: number; promptTokens: number }> };
    const usage = async (): Promise<Report> => JSON.parse((await run(process.execPath, [cli, 'usage', '1', '--json'], { env })).stdout) as Report;
    const report = await readUntil(usage, (r) => r.byDevice['cam-5'] !== undefined, 5000, 250);
    expect(report.byDevice['cam-5']?.requests).toBe(1);
    expect(report.byDevice['cam-5']?.promptTokens).toBe((second?.ok && second.usage?.prompt_tokens) || -1);
    const table = (await run(process.execPath, [cli, 'usage', '1'], { env })).stdout;
    expect(table).toMatch(/^device +requests +prompt tokens +completion tokens +cost$/m);
    expect(table).toMatch(/^cam-5 +1 +\d+ +\d+ +\$[\d.]+$/m);
    // Fourteen CLI processes, each a Node start: on a loaded machine that alone can pass 20 s.
  }, 60_000);
});
