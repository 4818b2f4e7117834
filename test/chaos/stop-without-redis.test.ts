// A SIGTERM while Redis is out of reach: the stop ends (it used to wait forever for Redis to
// take the last commands), names the part it gave up on, and exits non-zero.
import { afterEach, describe, expect, it } from 'vitest';
import { startServiceProcess, type ServiceProcess } from '../../device-sim/service-process.js';
import { startPrivateRedis, type PrivateRedis } from '../../bench/redis-server.js';
import { readyz } from '../helpers/chaos.js';
import { uniquePrefix } from '../helpers/redis.js';

let service: ServiceProcess | undefined;
let redis: PrivateRedis | undefined;

afterEach(async () => {
  await service?.stop('SIGKILL');
  await redis?.stop();
  service = undefined;
  redis = undefined;
});

describe('chaos: SIGTERM while Redis is down', () => {
  it('stops within SHUTDOWN_GRACE_MS and the stop margin, naming what did not close', { timeout: 60_000 }, async () => {
    redis = await startPrivateRedis();
    service = await startServiceProcess({ REDIS_URL: redis.url, REDIS_PREFIX: uniquePrefix('stop-no-redis'), SHUTDOWN_GRACE_MS: '500' });
    const { httpPort } = service;
    await redis.stop();
    redis = undefined;
    // Unready first, so the stop meets Redis away rather than racing its going.
    for (let i = 0; i < 50 && (await readyz(httpPort)) === 200; i += 1) await new Promise((r) => setTimeout(r, 200));
    const running = service;
    running.child.kill('SIGTERM');
    const code = await Promise.race([running.exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 40_000))]);
    expect(code).toBe(1);
    const given = running.logs.find((l) => l.msg === 'stop deadline passed: the parts still closing are left as they are');
    expect(given).toMatchObject({ part: expect.any(String) });
  });
});
