// Every step of the Redis store runs unchanged on Redis Cluster: the whole Store contract runs
// against a one-node cluster (cluster mode on, every slot its own). There Redis refuses a call
// whose keys span slots (CROSSSLOT), and a script touching any key outside its declared keys'
// slot ("do not hash to the same slot"), so a key built without the deployment's hash tag, in
// KEYS or inside a script, fails the case that reaches it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPrivateRedis, type PrivateRedis } from '../../bench/redis-server.js';
import { RedisStore } from '../../bridge/store/redis.js';
import { connectRedis, deletePrefix, redisStoreUnderTest, uniquePrefix } from '../helpers/redis.js';
import { describeStoreContract, makeJob } from '../store/store-contract.js';
import { readUntil } from '../helpers/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'eab-cluster-'));
let server: PrivateRedis;
let redis: ReturnType<typeof connectRedis>;

beforeAll(async () => {
  server = await startPrivateRedis(['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, 'nodes.conf'), '--dir', dir]);
  redis = connectRedis(server.url);
  await redis.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
  const info = await readUntil(
    () => redis.call('CLUSTER', 'INFO') as Promise<string>,
    (text) => text.includes('cluster_state:ok'),
    10_000,
    50,
  );
  expect(info).toContain('cluster_state:ok');
}, 20_000);

afterAll(async () => {
  redis.disconnect();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('a one-node Redis Cluster', () => {
  it('refuses a script touching a key of another slot than its declared keys', async () => {
    // With a shebang a script runs as a function does (no compatibility mode allowing it).
    const script = "#!lua\nredis.call('GET', KEYS[1]); return redis.call('GET', 'elsewhere')";
    await expect(redis.eval(script, 1, '{a}:x')).rejects.toThrow(/same slot/);
  });

  it('runs a call of several steps (many) whose keys share the hash tag', async () => {
    const prefix = uniquePrefix('slots');
    const store = new RedisStore(redis, { prefix });
    const now = Date.now();
    const admitted = await Promise.all(
      ['a', 'b', 'c'].map((id) =>
        store.queue.admit(makeJob({ deviceId: `cam-${id}`, id, priority: 'normal', arrivalMs: now }), { deviceRpm: 10, queueMax: 10 }, now),
      ),
    );
    expect(admitted.map((r) => r.kind)).toEqual(['queued', 'queued', 'queued']);
    await deletePrefix(redis, prefix);
  });
});

describeStoreContract(
  'redis cluster (one node)',
  redisStoreUnderTest(() => redis),
);
