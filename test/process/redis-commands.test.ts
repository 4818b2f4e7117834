// What an idle request costs Redis, counted by Redis itself (MONITOR on a private redis-server):
// its admission, recorded reply and completion, alone and in calls shared by 16 requests. A
// guard for the store's batching (step-batch.ts, includes/call.lua): counts, not times.
import { spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPrivateRedis, type PrivateRedis } from '../../bench/redis-server.js';
import { jobFor, replyFor, requestBookkeeping } from '../../bench/store/workload.js';
import { RedisStore } from '../../bridge/store/redis.js';
import { readUntil } from '../helpers/wait.js';

let server: PrivateRedis;
let redis: Redis;

beforeAll(async () => {
  server = await startPrivateRedis();
  redis = new Redis(server.url, { enableAutoPipelining: true });
});
afterAll(async () => {
  redis.disconnect();
  await server.stop();
});

const LIMITS = { deviceRpm: 1000, queueMax: 1000, queueMaxBytes: 10_000_000 };
const CLAIM = { owner: 'inst-1', max: 1, leaseMs: 30_000, rpm: 10_000, tpm: 1_000_000 };

/** `n` requests admitted in one turn (each claimed along), then recorded in one, then completed in one. */
async function requests(store: RedisStore, first: number, n: number): Promise<void> {
  const now = Date.now();
  const jobs = Array.from({ length: n }, (_, i) => jobFor(first + i, 1, now)); // one device, its quota window warm
  const admitted = await Promise.all(jobs.map((job) => store.queue.admit(job, LIMITS, now, CLAIM)));
  const claimed = admitted.map((r) => {
    const job = r.kind === 'queued' ? r.along?.claim.jobs[0] : undefined;
    if (!job) throw new Error(`not claimed along: ${JSON.stringify(r)}`);
    return job;
  });
  await Promise.all(claimed.map((job) => store.queue.recordReply(job, replyFor(job, now), CLAIM.owner)));
  await Promise.all(claimed.map((job) => store.queue.complete(job, replyFor(job, now), { ttlS: 600, deadLetter: false, ...requestBookkeeping(job) }, now)));
}

interface Command {
  name: string;
  /** Its first argument: the key, for a data command. */
  key: string | undefined;
}

/** The commands Redis ran while `work` ran: MONITOR's lines, each one command. */
async function monitored(work: () => Promise<void>): Promise<Command[]> {
  const monitor = spawn('redis-cli', ['-p', String(server.port), 'monitor']);
  let out = '';
  monitor.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  await readUntil(
    async () => out,
    (text) => text.startsWith('OK'),
    5000,
  );
  await work();
  await redis.ping('end of work');
  await readUntil(
    async () => out,
    (text) => text.includes('"end of work"'),
    5000,
  );
  monitor.kill();
  return out
    .split('\n')
    .filter((line) => line.includes('"') && !line.includes('"end of work"'))
    .map((line) => {
      const [name, key] = [...line.matchAll(/"([^"]*)"/g)].map((m) => m[1]);
      return { name: (name ?? '').toUpperCase(), key };
    });
}

/** How many of `commands` are named `name`, or touch `key`. */
const named = (commands: Command[], name: string): number => commands.filter((c) => c.name === name).length;
const touching = (commands: Command[], key: string): number => commands.filter((c) => c.key === key).length;

describe('Redis commands of an idle request', () => {
  it('are 23 alone (admit, record, complete: 3 calls) and at most 12.5 each when 16 requests share the calls (still 3)', async () => {
    const store = new RedisStore(redis, { prefix: 'commands', health: { healthy: () => true, admitCutoff: () => Date.now() + 60_000 } });
    await requests(store, 0, 2); // loads the function library

    const alone = await monitored(() => requests(store, 100, 1));
    expect(named(alone, 'FCALL')).toBe(3);
    expect(alone, alone.map((c) => c.name).join(' ')).toHaveLength(23);

    const shared = await monitored(() => requests(store, 200, 16));
    expect(named(shared, 'FCALL')).toBe(3);
    expect(shared.length / 16).toBeLessThanOrEqual(12.5);
    // What every admission reads the same is read once per call, and counted counters written once.
    expect(named(shared, 'TIME')).toBe(1);
    expect(named(shared, 'HVALS')).toBe(1);
    // The upstream's window: one read and its four counters written once (alone: the same per request).
    expect(touching(alone, '{commands}:budget')).toBe(5);
    expect(touching(shared, '{commands}:budget')).toBe(5);
    // The stored bytes: read once and written once by the admissions' call, once by the completions'.
    expect(touching(shared, '{commands}:qbytes')).toBe(3);
  });
});
