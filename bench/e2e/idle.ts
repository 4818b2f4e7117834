// The idle-connections measurement: a fresh bridge (memory store) holding many subscribed,
// silent devices while a light load runs beside them; its memory before, at the connection
// burst's peak and once settled, and the light load's latency.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { connectIdle } from '../../device-sim/idle.js';
import { startServiceProcess } from '../../device-sim/service-process.js';
import { rssMb } from '../proc.js';
import type { IdleResult, Latency } from '../results.js';
import { distFile, log } from './console.js';
import { idleTimings, type Plan } from './plan.js';
import { bridgeEnv } from './systems.js';
import type { Upstream } from './upstream.js';

const LIGHT_LOAD_RATE = 100;
/** Sockets for the generator's or bridge's own use besides the idle devices. */
const FD_HEADROOM = 200;

interface LightLoadReport {
  overall: { lost: number; latencyMs: Latency | null };
}

/** `device-sim` with a few devices at a light rate beside the idle ones, as a separate process. */
async function lightLoad(mqttPort: number, durationS: number): Promise<LightLoadReport> {
  const sim = spawn(
    process.execPath,
    [
      distFile('device-sim/cli.js'),
      '--url',
      `mqtt://127.0.0.1:${mqttPort}`,
      '--devices',
      '10',
      '--rate',
      String(LIGHT_LOAD_RATE),
      '--duration',
      String(durationS),
      '--json',
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  sim.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  await new Promise((resolve) => sim.once('exit', resolve));
  return JSON.parse(out) as LightLoadReport;
}

/**
 * The bridge's RSS once the connection burst's garbage is given back. V8 returns it only when
 * its memory reducer runs, some time after allocation calms, so this waits for RSS to fall by
 * a tenth and then hold still for 3 s, or for `maxS` seconds, whichever comes first.
 */
async function settledRss(pid: number, maxS: number): Promise<number> {
  const deadline = Date.now() + maxS * 1000;
  const start = rssMb(pid);
  let last = start;
  let stillSince = Date.now();
  while (Date.now() < deadline) {
    await sleep(500);
    const now = rssMb(pid);
    if (now !== last) stillSince = Date.now();
    last = now;
    if (now <= start * 0.9 && Date.now() - stillSince >= 3000) break;
  }
  return last;
}

/** Samples RSS every 250 ms and keeps the highest, to catch the connection burst's peak. */
function peakSampler(pid: number): { peak: () => number; stop: () => void } {
  let peakMb = rssMb(pid);
  const timer = setInterval(() => (peakMb = Math.max(peakMb, rssMb(pid))), 250);
  return { peak: () => peakMb, stop: () => clearInterval(timer) };
}

async function measureIdle(count: number, upstream: Upstream, lightLoadS: number, settleS: number): Promise<IdleResult> {
  const service = await startServiceProcess(bridgeEnv(upstream.url, { MAX_CONNECTIONS: String(count + 1000) }));
  const pid = service.child.pid!;
  try {
    const rssBeforeMb = rssMb(pid);
    const sampler = peakSampler(pid);
    const fleet = await connectIdle({ host: '127.0.0.1', port: service.mqttPort, count });
    try {
      const report = await lightLoad(service.mqttPort, lightLoadS);
      const rssSettledMb = await settledRss(pid, settleS);
      const rssPeakMb = sampler.peak();
      const perConnectionKb = (mb: number): number => (fleet.connected > 0 ? Math.round(((mb - rssBeforeMb) * 1024 * 10) / fleet.connected) / 10 : 0);
      const latency = report.overall.latencyMs ?? { p50: 0, p95: 0, p99: 0, max: 0 };
      return {
        devices: count,
        connected: fleet.connected,
        dropped: fleet.dropped,
        rssBeforeMb,
        rssPeakMb,
        rssSettledMb,
        peakPerConnectionKb: perConnectionKb(rssPeakMb),
        settledPerConnectionKb: perConnectionKb(rssSettledMb),
        settleS,
        lightLoad: { rate: LIGHT_LOAD_RATE, latencyMs: { p50: latency.p50, p95: latency.p95, p99: latency.p99, max: latency.max }, lost: report.overall.lost },
      };
    } finally {
      sampler.stop();
      await fleet.close();
    }
  } finally {
    await service.stop();
  }
}

function hardFileLimit(): number {
  const match = /Max open files\s+\d+\s+(\d+|unlimited)/.exec(readFileSync('/proc/self/limits', 'utf8'));
  return match?.[1] === undefined || match[1] === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(match[1]);
}

/** The idle measurement with as many devices as asked for, or as the open-files limit allows. */
export async function runIdle(plan: Plan, upstream: Upstream): Promise<IdleResult> {
  // Every idle device is a socket in the bridge and one in the generator: both need a descriptor.
  const limit = hardFileLimit();
  const count = Math.min(plan.idle, limit - FD_HEADROOM);
  log(`connecting ${count} idle devices`);
  const { lightLoadS, settleS } = idleTimings(plan);
  const result = await measureIdle(count, upstream, lightLoadS, settleS);
  if (count < plan.idle) {
    result.note = `${plan.idle} were asked for; ${count} tried, because this machine's hard limit on open files is ${limit} per process (\`ulimit -Hn\`).`;
  }
  return result;
}
