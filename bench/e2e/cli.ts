// `npm run bench`'s command line: options, their defaults, and the plan they make.
import { parseArgs } from 'node:util';
import type { SystemId } from '../results.js';
import { FULL, OVERLOAD_TTL_MS, QUICK, type Plan } from './plan.js';
import { SYSTEMS } from './systems.js';

export const USAGE = `usage: npm run bench [-- --quick] [--systems echo,handler,bullmq,memory,redis] [--idle 20000] [--out bench/results]
  [--workers 2] [--devices 200] [--profile DIR] [--rates 1000,2000 [--seconds 15]]
  [--overload-ttl-ms 2000] [--overload-rate N]
  --rates: only these fixed rates, each for --seconds (default 3), no step search and no overload
  step: for comparing builds by the CPU per request the log line reports (µs/req).
  --overload-ttl-ms: the ttl_ms every request of the overload step carries (0: none); replies
  more than 100 ms past it are counted late. The bridges' overload step runs twice: with
  OVERLOAD_QUEUE_WAIT_MS=1000 (as in the step search), then on a fresh bridge with the default.
  --overload-rate: no step search; after the warm-up, only the overload step(s) at this rate:
  for comparing builds' overload behaviour at one rate, whatever the knee of the moment.
  handler: Aedes + a handler calling the upstream with undici, no queue, no limits, no guarantees.
  handler-thread (not in the default run): the same with the upstream calls in a worker thread.
  bullmq: Aedes + BullMQ (priority, limiter, worker concurrency) + undici, on the same Redis.
  redis-x2 (not in the default run): two bridge instances on one Redis, devices spread over both.
  plant-x1, plant-x2, plant-x3 (not in the default run): 1, 2 or 3 bridges with BROKER_URL on a
  private Mosquitto (one shared subscription) and one Redis; the devices connect to Mosquitto.
  REDIS_URL: use that Redis for (c) and (d); otherwise a redis-server is started on a free port.`;

export interface RunOptions {
  plan: Plan;
  systems: SystemId[];
  workers: number;
  devices: number;
  out: string;
  profile: string | undefined;
}

/** Either what to run, or the exit code when there is nothing to run (help, bad options). */
export type Parsed = { run: RunOptions } | { exit: number };

const OPTIONS = {
  quick: { type: 'boolean', default: false },
  systems: { type: 'string', default: 'echo,handler,bullmq,memory,redis' },
  idle: { type: 'string' },
  out: { type: 'string', default: 'bench/results' },
  workers: { type: 'string', default: '2' },
  devices: { type: 'string', default: '200' },
  profile: { type: 'string' },
  rates: { type: 'string' },
  seconds: { type: 'string' },
  'overload-ttl-ms': { type: 'string' },
  'overload-rate': { type: 'string' },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

function refuse(message: string): Parsed {
  process.stderr.write(`${message}\n${USAGE}\n`);
  return { exit: 2 };
}

/** --rates turns the search into these fixed rates, each for --seconds; undefined if malformed. */
function fixedRates(plan: Plan, rates: string, seconds: string | undefined): Plan | undefined {
  const ladder = rates.split(',').map(Number);
  const stepS = Number(seconds ?? plan.stepS);
  if (!ladder.every((r) => Number.isInteger(r) && r > 0) || !(stepS > 0)) return undefined;
  return { ...plan, fixed: true, ladder, bisections: 0, stepS };
}

export function parseCli(argv: string[]): Parsed {
  const { values } = parseArgs({ args: argv, strict: true, options: OPTIONS });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return { exit: 0 };
  }
  const overloadTtlMs = Number(values['overload-ttl-ms'] ?? OVERLOAD_TTL_MS);
  if (!(Number.isInteger(overloadTtlMs) && overloadTtlMs >= 0)) {
    return refuse(`--overload-ttl-ms takes a non-negative integer of milliseconds (got ${values['overload-ttl-ms']})`);
  }
  const overloadRate = values['overload-rate'] === undefined ? undefined : Number(values['overload-rate']);
  if (overloadRate !== undefined && !(Number.isInteger(overloadRate) && overloadRate > 0 && values.rates === undefined)) {
    return refuse(`--overload-rate takes a positive integer, without --rates (got ${values['overload-rate']})`);
  }
  const idle = Number(values.idle ?? (values.quick ? 1000 : 20000));
  let plan: Plan = { ...(values.quick ? QUICK : FULL), fixed: false, idle, overloadTtlMs, ...(overloadRate ? { overloadRate } : {}) };
  if (values.rates !== undefined) {
    const fixed = fixedRates(plan, values.rates, values.seconds);
    if (!fixed) return refuse(`--rates takes positive integers (got ${values.rates}), --seconds a positive number`);
    plan = fixed;
  }
  const systems = values.systems.split(',').map((s) => s.trim()) as SystemId[];
  const unknown = systems.filter((s) => !SYSTEMS.includes(s));
  if (unknown.length > 0) return refuse(`unknown system ${unknown.join(', ')} (known: ${SYSTEMS.join(', ')})`);
  return { run: { plan, systems, workers: Number(values.workers), devices: Number(values.devices), out: values.out, profile: values.profile } };
}
