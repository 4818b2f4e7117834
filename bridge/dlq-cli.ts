// `edge-ai-bridge dlq list | replay [deviceId/id …] | purge`: the dead-letter list of a
// deployment on Redis (REDIS_URL, REDIS_PREFIX), for operators. Without Redis the list
// lives inside the running process and only its admin API can reach it.
import { Redis } from 'ioredis';
import { ConfigError, loadConfig } from './config.js';
import { RedisStore } from './store/redis.js';

const USAGE = 'usage: edge-ai-bridge dlq list | replay [deviceId/id ...] | purge';

function fail(message: string): never {
  process.stderr.write(`edge-ai-bridge dlq: ${message}\n`);
  process.exit(2);
}

export async function runDlq(args: string[]): Promise<void> {
  const [command, ...keys] = args;
  if (command !== 'list' && command !== 'replay' && command !== 'purge') fail(USAGE);
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) fail(err.message);
    throw err;
  }
  if (config.redisUrl === undefined) {
    fail('REDIS_URL is not set: without Redis the dead letters live inside the running bridge');
  }
  const redis = new Redis(config.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  try {
    await redis.connect().catch((err: Error) => fail(`REDIS_URL: cannot connect to Redis: ${err.message}`));
    const store = new RedisStore(redis, { prefix: config.redisPrefix });
    switch (command) {
      case 'list':
        for (const entry of await store.deadLetters()) {
          const { job, reply, atMs } = entry;
          const error = reply.ok ? undefined : reply.error;
          process.stdout.write(`${JSON.stringify({ key: job.key, priority: job.priority, at: new Date(atMs).toISOString(), error })}\n`);
        }
        break;
      case 'replay': {
        const n = await store.replayDeadLetters(keys.length > 0 ? keys : 'all', config.priorityOffsetsMs, Date.now());
        process.stdout.write(`replayed ${n}\n`);
        break;
      }
      case 'purge':
        process.stdout.write(`purged ${await store.purgeDeadLetters()}\n`);
        break;
    }
  } finally {
    redis.disconnect();
  }
}
