// Operator commands against a deployment on Redis (REDIS_URL, REDIS_PREFIX):
//   edge-ai-bridge dlq list | replay [deviceId/id …] | purge
//   edge-ai-bridge usage [hours]
//   edge-ai-bridge budgets
// Without Redis these live inside the running process and only its admin API reaches them.
import { Redis } from 'ioredis';
import { newRedis } from '../../broker/redis-endpoint.js';
import { ConfigError } from '../../contract/index.js';
import { loadConfig, type Config } from '../config/config.js';
import { RedisStore } from '../store/redis.js';
import { budgetReport } from './budgets-report.js';

export const OPS_USAGE = `  dlq list | replay [deviceId/id …] | purge
            the dead-letter list of the deployment on REDIS_URL (REDIS_PREFIX)
  usage [hours]
            tokens and estimated cost by device, model and priority (default: the last 24 hours)
  budgets   each CONFIG_FILE budget's use in its current period`;

function fail(message: string): never {
  process.stderr.write(`edge-ai-bridge: ${message}\n`);
  process.exit(2);
}

async function withStore(run: (store: RedisStore, config: Config) => Promise<void>): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) fail(err.message);
    throw err;
  }
  if (config.redis === undefined) {
    fail('REDIS_URL is not set: without Redis this lives inside the running bridge');
  }
  const redis = newRedis(Redis, config.redis, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  try {
    await redis.connect().catch((err: Error) => fail(`REDIS_URL: cannot connect to Redis: ${err.message}`));
    await run(new RedisStore(redis, { prefix: config.redisPrefix, fairShare: config.fairShare }), config);
  } finally {
    redis.disconnect();
  }
}

const print = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

export async function runDlq(args: string[]): Promise<void> {
  const [command, ...keys] = args;
  if (command !== 'list' && command !== 'replay' && command !== 'purge') fail(`usage:\n${OPS_USAGE}`);
  await withStore(async (store, config) => {
    if (command === 'list') {
      for (const { job, reply, atMs } of await store.deadLetters()) {
        const error = reply.ok ? undefined : reply.error;
        print(JSON.stringify({ key: job.key, priority: job.priority, at: new Date(atMs).toISOString(), error }));
      }
    } else if (command === 'replay') {
      print(`replayed ${await store.replayDeadLetters(keys.length > 0 ? keys : 'all', config.priorityOffsetsMs, Date.now())}`);
    } else {
      print(`purged ${await store.purgeDeadLetters()}`);
    }
  });
}

export async function runUsage(args: string[]): Promise<void> {
  const hours = args[0] === undefined ? 24 : Number(args[0]);
  if (!Number.isInteger(hours) || hours < 1) fail(`usage: hours must be a positive integer (got "${args[0] ?? ''}")`);
  await withStore(async (store) => {
    const now = Date.now();
    print(JSON.stringify(await store.usage(now - hours * 3_600_000, now), null, 2));
  });
}

export async function runBudgets(): Promise<void> {
  await withStore(async (store, config) => {
    print(JSON.stringify(await budgetReport(config.file.budgets, store, Date.now()), null, 2));
  });
}
