// `npm run bench:store`: the store alone, through the full cycle admit → claim → complete for
// N jobs, per Store implementation, with batching off and on, for one instance and for two
// sharing one Redis prefix (scenarios: bench/store/scenarios.ts). Prints jobs/s and Redis
// commands per job, plus Redis and client CPU as a hint of where the time goes.
//
// It only ever touches keys under its own `{bench-<random>-<scenario>}` prefixes and deletes
// them (SCAN MATCH + DEL) after each scenario. It never flushes anything.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { deleteDeployment } from '../bridge/store/redis-keys.js';
import { runInProcess } from './store/in-process.js';
import { connect } from './store/meters.js';
import { readOptions, type StoreBenchOptions } from './store/options.js';
import { runProcesses, worker, type WorkerTask } from './store/processes.js';
import { SCENARIOS, selectScenarios, slug, type Row, type Scenario } from './store/scenarios.js';
import { machine, printTable } from './store/table.js';

const options = readOptions();

/** Progress and headings: on stderr with --json, so stdout holds the JSON alone. */
const log = (msg: string) => (options.json ? process.stderr : process.stdout).write(`${msg}\n`);

/** One scenario under its own prefix, whose keys (and its warm-up's) are deleted afterwards. */
async function runScenario(s: Scenario, prefix: string, admin: Redis | undefined): Promise<Row> {
  try {
    return s.processes && admin ? await runProcesses(s, prefix, admin, options) : await runInProcess(s, prefix, admin, options);
  } finally {
    if (admin) {
      await deleteDeployment(admin, prefix);
      for (let n = 0; n < s.instances; n++) await deleteDeployment(admin, `${prefix}-warm${n}`);
    }
  }
}

async function runScenarios(scenarios: Scenario[]): Promise<Row[]> {
  const run = randomBytes(4).toString('hex');
  const admin = scenarios.some((s) => s.store === 'redis') ? await connect(options.redisUrl, false) : undefined;
  const rows: Row[] = [];
  try {
    for (const s of scenarios) {
      const r = await runScenario(s, `bench-${run}-${slug(s.name)}`, admin);
      rows.push(r);
      log(`  ${s.name}: ${r.jobsPerS} jobs/s`);
    }
  } finally {
    admin?.disconnect();
  }
  return rows;
}

async function main(o: StoreBenchOptions): Promise<void> {
  if (o.help) {
    console.log(`usage: store-bench [--jobs N] [--devices N] [--claim-max N] [--inflight N] [--redis URL] [--json]
       [--scenarios name,...]   scenarios (by slug): ${SCENARIOS.map((s) => slug(s.name)).join(', ')}`);
    return;
  }
  const scenarios = selectScenarios(o.scenarios);
  if (scenarios.length === 0) throw new Error(`no scenario matches ${String(o.scenarios)}`);

  const info = await machine(o.redisUrl);
  log(`store benchmark: ${o.jobs} jobs, ${o.devices} devices, claim max ${o.claimMax} / ${o.inflight} in flight when batched`);
  log(`machine: ${info.cpus} CPUs (${info.cpu}), Node ${info.node}, Redis ${info.redis}, ${info.platform}\n`);
  const rows = await runScenarios(scenarios);

  if (o.json) {
    console.log(JSON.stringify({ machine: info, jobs: o.jobs, devices: o.devices, claimMax: o.claimMax, inflight: o.inflight, rows }, null, 2));
  } else {
    log('');
    printTable(rows);
  }
}

if (options.worker !== undefined) {
  await worker(JSON.parse(options.worker) as WorkerTask, options);
} else {
  await main(options).catch((err: unknown) => {
    console.error(err instanceof Error ? err.stack : err);
    process.exitCode = 1;
  });
}
