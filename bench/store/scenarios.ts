// The store benchmark's scenarios, one table row each, and the result row each produces.
import type { InstanceResult, Mode } from './instance.js';
import { round, type Counters, type ServerSnapshot } from './meters.js';

export interface Scenario {
  name: string;
  store: 'memory' | 'redis';
  instances: 1 | 2;
  mode: Mode;
  autoPipelining: boolean;
  /** Two instances as two child processes rather than two connections in this process. */
  processes: boolean;
}

export const SCENARIOS: Scenario[] = [
  { name: 'memory serial', store: 'memory', instances: 1, mode: 'serial', autoPipelining: false, processes: false },
  { name: 'memory batched', store: 'memory', instances: 1, mode: 'batched', autoPipelining: false, processes: false },
  { name: 'redis x1 serial', store: 'redis', instances: 1, mode: 'serial', autoPipelining: false, processes: false },
  { name: 'redis x1 batched', store: 'redis', instances: 1, mode: 'batched', autoPipelining: false, processes: false },
  { name: 'redis x1 batched+autopipe', store: 'redis', instances: 1, mode: 'batched', autoPipelining: true, processes: false },
  { name: 'redis x1 request path', store: 'redis', instances: 1, mode: 'request', autoPipelining: true, processes: false },
  { name: 'redis x2 serial (2 procs)', store: 'redis', instances: 2, mode: 'serial', autoPipelining: false, processes: true },
  { name: 'redis x2 batched (2 procs)', store: 'redis', instances: 2, mode: 'batched', autoPipelining: false, processes: true },
  { name: 'redis x2 batched+autopipe (2 procs)', store: 'redis', instances: 2, mode: 'batched', autoPipelining: true, processes: true },
  { name: 'redis x2 batched+autopipe (1 proc, 2 conns)', store: 'redis', instances: 2, mode: 'batched', autoPipelining: true, processes: false },
];

export const slug = (name: string) =>
  name
    .replace(/[^a-z0-9]+/gi, '-')
    .replace(/^-|-$/g, '')
    .toLowerCase();

/** The scenarios whose slug contains one of the comma-separated wanted slugs; all when none is given. */
export function selectScenarios(wanted: string | undefined): Scenario[] {
  const names = wanted
    ?.split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  return names ? SCENARIOS.filter((s) => names.some((w) => slug(s.name).includes(slug(w)))) : SCENARIOS;
}

export interface Row {
  scenario: string;
  instances: number;
  mode: Mode;
  autoPipelining: boolean;
  jobs: number;
  seconds: number;
  jobsPerS: number;
  /** Commands our connections sent, per job. */
  redisCallsPerJob: number;
  /** Socket writes (requests on the wire; an auto-pipeline batch is one), per job. */
  writesPerJob: number;
  claims: number;
  emptyClaims: number;
  /** Redis main-thread CPU during the run, as a share of wall time (1 = saturated). */
  redisCpuShare: number | undefined;
  /** Server-side EVALSHA cost (script run time), µs per job. */
  fcallUsecPerJob: number | undefined;
  /** Every command Redis ran per job, those inside scripts included. */
  serverCommandsPerJob: number | undefined;
  /** Redis main-thread CPU per job, µs. */
  redisCpuUsPerJob: number | undefined;
  /** Node CPU (user + system) of the benchmark's instance processes, as a share of wall time. */
  clientCpuShare: number;
  /** All CPUs of the machine busy during the run (1 = every core saturated; others' load counts too). */
  machineCpuShare: number | undefined;
}

/** What one scenario's run measured, before it is reduced to a row. */
export interface Measured {
  seconds: number;
  results: InstanceResult[];
  counters: Counters[];
  clientCpuS: number;
  machineBusyShare: number | undefined;
  before: ServerSnapshot | undefined;
  after: ServerSnapshot | undefined;
}

/** The row of a scenario; throws unless every job was admitted and completed exactly once. */
export function toRow(s: Scenario, jobs: number, m: Measured): Row {
  const sum = <K extends keyof InstanceResult>(k: K) => m.results.reduce((t, r) => t + r[k], 0);
  const completed = sum('completed');
  if (sum('admitted') !== jobs || completed !== jobs) {
    throw new Error(`${s.name}: admitted ${sum('admitted')} and completed ${completed} of ${jobs} jobs`);
  }
  const commands = m.counters.reduce((t, c) => t + c.commands, 0);
  const writes = m.counters.reduce((t, c) => t + c.writes, 0);
  const { before, after, seconds } = m;
  const serverSide = s.store === 'redis' && before && after;
  return {
    scenario: s.name,
    instances: s.instances,
    mode: s.mode,
    autoPipelining: s.autoPipelining,
    jobs,
    seconds: round(seconds, 3),
    jobsPerS: Math.round(jobs / seconds),
    redisCallsPerJob: round(commands / jobs, 3),
    writesPerJob: round(writes / jobs, 3),
    claims: sum('claims'),
    emptyClaims: sum('emptyClaims'),
    redisCpuShare: serverSide ? round((after.cpuS - before.cpuS) / seconds, 2) : undefined,
    fcallUsecPerJob: serverSide ? round((after.fcallUsec - before.fcallUsec) / jobs, 1) : undefined,
    serverCommandsPerJob: serverSide ? round((after.allCalls - before.allCalls) / jobs, 1) : undefined,
    redisCpuUsPerJob: serverSide ? round(((after.cpuS - before.cpuS) / jobs) * 1e6, 1) : undefined,
    clientCpuShare: round(m.clientCpuS / seconds, 2),
    machineCpuShare: m.machineBusyShare,
  };
}
