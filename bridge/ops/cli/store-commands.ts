// Operator commands against a deployment on Redis (REDIS_URL, REDIS_PREFIX):
//   edge-ai-bridge dlq list [--limit N] | show deviceId/id | replay [deviceId/id …] | purge
//   edge-ai-bridge usage [hours]
//   edge-ai-bridge budgets
// Without Redis these live inside the running process and only its admin API reaches them.
import { Redis } from 'ioredis';
import { newRedis } from '../../config/redis-endpoint.js';
import { ConfigError } from '../../../contract/index.js';
import { loadConfig, type Config } from '../../config/config.js';
import { RedisStore } from '../../store/redis.js';
import type { DeadLetter } from '../../store/port.js';
import { budgetReport } from '../budgets-report.js';
import { OPS_USAGE } from './store-commands-help.js';
import { budgetsTable, deadLettersTable, usageTable } from './tables.js';

export { OPS_USAGE } from './store-commands-help.js';

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
    const deadLetters = { max: config.dlqMax, maxBytes: config.dlqMaxBytes, ttlS: config.dlqTtlS };
    await run(new RedisStore(redis, { prefix: config.redisPrefix, fairShare: config.fairShare, deadLetters }), config);
  } finally {
    redis.disconnect();
  }
}

const print = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

/** Dead letters read per page by `dlq list`. */
const LIST_PAGE = 100;

/** `--json` and `--yes` wherever they are; the rest in order. */
function flags(args: string[]): { rest: string[]; json: boolean; yes: boolean } {
  return { rest: args.filter((a) => a !== '--json' && a !== '--yes'), json: args.includes('--json'), yes: args.includes('--yes') };
}

export async function runDlq(args: string[]): Promise<void> {
  const {
    rest: [command, ...rest],
    json,
    yes,
  } = flags(args);
  if (command !== 'list' && command !== 'show' && command !== 'replay' && command !== 'purge') fail(`usage:\n${OPS_USAGE}`);
  const limit = command === 'list' ? listLimit(rest) : undefined;
  const key = command === 'show' ? showKey(rest) : undefined;
  if (command === 'purge' && !yes && !(await confirmed('purge every dead letter'))) fail('dlq purge: nothing purged (add --yes to purge without asking)');
  await withStore(async (store, config) => {
    const now = Date.now();
    if (command === 'list') await listDeadLetters(store, limit ?? Infinity, now, json);
    else if (key !== undefined) {
      const letter = await store.operations.deadLetters.get(key, now);
      if (!letter) {
        process.stderr.write(`edge-ai-bridge: no dead letter ${key}\n`);
        process.exitCode = 1;
        return;
      }
      print(JSON.stringify({ ...lineOf(letter), request: letter.job.request }, null, 2));
    } else if (command === 'replay') {
      const replayed =
        rest.length > 0
          ? await store.operations.deadLetters.replay(rest, config.priorityOffsetsMs, now)
          : await store.operations.deadLetters.replayAll(config.priorityOffsetsMs, now);
      print(`replayed ${replayed}`);
    } else {
      print(`purged ${await store.operations.deadLetters.purge()}`);
    }
  });
}

/** `show deviceId/id` or `show deviceId id`. */
function showKey(rest: string[]): string {
  if (rest.length === 2) return `${rest[0]}/${rest[1]}`;
  if (rest.length === 1 && (rest[0] as string).includes('/')) return rest[0] as string;
  fail('usage: dlq show DEVICE ID (or deviceId/id)');
}

/** On a terminal, asks; elsewhere (a script) the answer is no. */
async function confirmed(what: string): Promise<boolean> {
  if (!process.stdin.isTTY) return false;
  const { createInterface } = await import('node:readline/promises');
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(`${what}? [y/N] `)).trim());
  } finally {
    rl.close();
  }
}

function listLimit(rest: string[]): number | undefined {
  if (rest.length === 0) return undefined;
  const limit = Number(rest[1]);
  if (rest.length !== 2 || rest[0] !== '--limit' || !Number.isInteger(limit) || limit < 1) fail('usage: dlq list [--limit N] [--json] (N a positive integer)');
  return limit;
}

/** Prints up to `limit` entries, oldest first, one page in memory at a time (a table per page). */
async function listDeadLetters(store: RedisStore, limit: number, now: number, json: boolean): Promise<void> {
  let printed = 0;
  let after: string | undefined;
  do {
    const page = await store.operations.deadLetters.page(Math.min(LIST_PAGE, limit - printed), after, now);
    if (json) for (const letter of page.entries) print(JSON.stringify(lineOf(letter)));
    else if (page.entries.length > 0) {
      const lines = deadLettersTable(page.entries).split('\n');
      print((printed === 0 ? lines : lines.slice(1)).join('\n'));
    }
    printed += page.entries.length;
    after = page.next;
  } while (after !== undefined && printed < limit);
  if (!json && printed === 0) print('no dead letters');
}

function lineOf({ job, reply, atMs }: DeadLetter): Record<string, unknown> {
  return { key: job.key, priority: job.priority, at: new Date(atMs).toISOString(), error: reply.ok ? undefined : reply.error, attempts: job.attempts };
}

export async function runUsage(args: string[]): Promise<void> {
  const { rest, json } = flags(args);
  const hours = rest[0] === undefined ? 24 : Number(rest[0]);
  if (!Number.isInteger(hours) || hours < 1) fail(`usage: hours must be a positive integer (got "${rest[0] ?? ''}")`);
  await withStore(async (store) => {
    const now = Date.now();
    const report = await store.operations.usage(now - hours * 3_600_000, now);
    process.stdout.write(json ? `${JSON.stringify(report, null, 2)}\n` : usageTable(report));
  });
}

export async function runBudgets(args: string[] = []): Promise<void> {
  const { json } = flags(args);
  await withStore(async (store, config) => {
    const report = await budgetReport(config.file.budgets, store.operations, Date.now());
    process.stdout.write(json ? `${JSON.stringify(report, null, 2)}\n` : budgetsTable(report));
  });
}
