// `npm run bench`'s command line: options, their defaults, and the plan they make.
import { parseArgs } from 'node:util';
import type { SystemId } from '../results.js';
import { FULL, QUICK, type Plan } from './plan.js';
import { SYSTEMS } from './systems.js';

export const USAGE = `usage: npm run bench [-- --quick] [--systems echo,handler,bullmq,memory,redis] [--idle 20000] [--out bench/results]
  [--workers 2] [--devices 200] [--profile DIR] [--rates 1000,2000 [--seconds 15]]
  --rates: only these fixed rates, each for --seconds (default 3), no step search and no overload
  step: for comparing builds by the CPU per request the log line reports (µs/req).
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
  let plan: Plan = { ...(values.quick ? QUICK : FULL), fixed: false, idle: Number(values.idle ?? (values.quick ? 1000 : 20000)) };
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
