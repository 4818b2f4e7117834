// The store benchmark's report: the machine it ran on and one aligned text row per scenario.
import os from 'node:os';
import { connect } from './meters.js';
import type { Row } from './scenarios.js';

export interface Machine {
  cpus: number;
  cpu: string;
  node: string;
  redis: string;
  platform: string;
}

export async function machine(redisUrl: string): Promise<Machine> {
  const cpu = os.cpus()[0]?.model ?? 'unknown';
  let redisVersion = 'n/a';
  try {
    const admin = await connect(redisUrl, false);
    redisVersion = /^redis_version:(\S+)/m.exec(await admin.info('server'))?.[1] ?? 'unknown';
    admin.disconnect();
  } catch {
    // reported as n/a
  }
  return { cpus: os.availableParallelism(), cpu, node: process.version, redis: redisVersion, platform: `${os.platform()} ${os.release()}` };
}

const HEAD = [
  'scenario',
  'jobs',
  'seconds',
  'jobs/s',
  'Redis calls/job',
  'writes/job',
  'empty claims',
  'Redis CPU',
  'fcall µs/job',
  'Redis cmds/job',
  'Redis CPU µs/job',
  'client CPU',
  'machine CPU',
];

const percent = (share: number | undefined) => (share === undefined ? '-' : `${Math.round(share * 100)}%`);

function cells(r: Row): string[] {
  return [
    r.scenario,
    String(r.jobs),
    r.seconds.toFixed(3),
    String(r.jobsPerS),
    r.redisCallsPerJob.toFixed(2),
    r.writesPerJob.toFixed(2),
    String(r.emptyClaims),
    percent(r.redisCpuShare),
    r.fcallUsecPerJob === undefined ? '-' : String(r.fcallUsecPerJob),
    r.serverCommandsPerJob === undefined ? '-' : String(r.serverCommandsPerJob),
    r.redisCpuUsPerJob === undefined ? '-' : String(r.redisCpuUsPerJob),
    percent(r.clientCpuShare),
    percent(r.machineCpuShare),
  ];
}

export function printTable(rows: Row[]): void {
  const body = rows.map(cells);
  const widths = HEAD.map((h, c) => Math.max(h.length, ...body.map((b) => (b[c] ?? '').length)));
  const line = (row: string[]) => row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join('  ');
  console.log(line(HEAD));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const b of body) console.log(line(b));
}
