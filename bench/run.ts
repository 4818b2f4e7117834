// `npm run bench`: one run that measures, side by side and on the same workload, an MQTT echo
// through the project's own broker, reference systems and the bridge with its memory and Redis
// stores, all against the upstream simulator at a fixed latency (systems: bench/e2e/systems.ts).
// Prints a Markdown table and writes bench/results/latest.json, latest.svg and latest-steps.md.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem, release } from 'node:os';
import { Redis } from 'ioredis';
import { parseCli, type RunOptions } from './e2e/cli.js';
import { log } from './e2e/console.js';
import { runIdle } from './e2e/idle.js';
import { measureSystem, overloadAlone } from './e2e/measure.js';
import { P99_LIMIT_MS, UPSTREAM_LATENCY_MS } from './e2e/plan.js';
import { needsRedis, startSut, type Sut } from './e2e/systems.js';
import { startUpstream, type Upstream } from './e2e/upstream.js';
import { startPrivateRedis, type PrivateRedis } from './redis-server.js';
import { formatReport, formatSteps } from './report.js';
import { renderLatencyChart } from './svg.js';
import type { BenchResults, SystemId, SystemResult } from './results.js';

async function machine(redisUrl: string | undefined): Promise<BenchResults['machine']> {
  let redis = 'not used';
  if (redisUrl) {
    const r = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await r.connect();
    redis = /redis_version:(\S+)/.exec(await r.info('server'))?.[1] ?? 'unknown';
    r.disconnect();
  }
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    memoryGb: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    redis,
    os: `Linux ${release()}`,
  };
}

/** What every system shares: the upstream simulator and, if any system needs one, a Redis. */
interface Shared {
  upstream: Upstream;
  redisUrl: string | undefined;
  privateRedis: PrivateRedis | undefined;
}

async function startShared(options: RunOptions): Promise<Shared> {
  const upstream = await startUpstream();
  const shared: Shared = { upstream, redisUrl: process.env.REDIS_URL, privateRedis: undefined };
  if (options.systems.some(needsRedis) && !shared.redisUrl) {
    shared.privateRedis = await startPrivateRedis();
    shared.redisUrl = shared.privateRedis.url;
    log(`started redis-server on port ${shared.privateRedis.port}`);
  }
  return shared;
}

/**
 * Each system in turn, started fresh and stopped after its measurement. A bridge with the
 * queue-wait guard set (BENCH_QUEUE_WAIT_MS) is then started again with the default (guard
 * off) for a second overload step at the same rate.
 */
async function measureSystems(options: RunOptions, shared: Shared, results: BenchResults): Promise<void> {
  const size = { workers: options.workers, devices: options.devices };
  const start = (id: SystemId, queueWaitMs?: number): Promise<Sut> => startSut(id, shared.upstream, shared.redisUrl ?? '', options.profile, queueWaitMs);
  for (const id of options.systems) {
    const sut = await start(id);
    let result: SystemResult;
    try {
      result = await measureSystem(sut, options.plan, shared.upstream, size);
    } finally {
      await sut.stop();
    }
    results.systems.push(result);
    const rate = result.overload?.[0]?.rate;
    if (rate === undefined || !sut.queueWaitMs) continue;
    const plain = await start(id, 0);
    try {
      result.overload?.push(await overloadAlone(plain, options.plan, shared.upstream, size, rate));
    } finally {
      await plain.stop();
    }
  }
}

function writeResults(out: string, results: BenchResults): void {
  mkdirSync(out, { recursive: true });
  writeFileSync(`${out}/latest.json`, `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(`${out}/latest.svg`, renderLatencyChart(results));
  writeFileSync(`${out}/latest-steps.md`, formatSteps(results));
  process.stdout.write(`${formatReport(results)}\n`);
  log(`wrote ${out}/latest.json, latest.svg and latest-steps.md in ${results.durationS} s`);
}

async function bench(argv: string[], options: RunOptions): Promise<void> {
  const started = Date.now();
  const shared = await startShared(options);
  try {
    const results: BenchResults = {
      startedAt: new Date(started).toISOString(),
      command: `npm run bench${argv.length > 0 ? ` -- ${argv.join(' ')}` : ''}`,
      quick: options.plan.quick,
      machine: await machine(options.systems.some(needsRedis) ? shared.redisUrl : undefined),
      upstreamLatencyMs: UPSTREAM_LATENCY_MS,
      p99LimitMs: P99_LIMIT_MS,
      generator: { workers: options.workers, connections: options.devices },
      systems: [],
      durationS: 0,
    };
    await measureSystems(options, shared, results);
    if (options.plan.idle > 0) results.idle = await runIdle(options.plan, shared.upstream);
    results.durationS = Math.round((Date.now() - started) / 1000);
    writeResults(options.out, results);
  } finally {
    shared.upstream.child.kill('SIGTERM');
    await shared.privateRedis?.stop();
  }
}

async function main(argv: string[]): Promise<number> {
  const parsed = parseCli(argv);
  if ('exit' in parsed) return parsed.exit;
  await bench(argv, parsed.run);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
