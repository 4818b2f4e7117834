// One system under load: the device fleet, the CPU meter over its processes and the steps
// recorded so far, shared by the step search and the overload step.
import { setTimeout as sleep } from 'node:timers/promises';
import { startLoad, type LoadFleet, type StepSummary } from '../../device-sim/load.js';
import { CpuMeter, cpuSeconds, rssMb } from '../proc.js';
import type { StepResult } from '../results.js';
import { endProgress, log, progress, sum } from './console.js';
import { MIX, P99_LIMIT_MS, type Plan } from './plan.js';
import { redisOfStep } from './redis-stats.js';
import { countsSince } from './shed.js';
import type { Sut } from './systems.js';
import type { Upstream } from './upstream.js';

export interface Session {
  sut: Sut;
  plan: Plan;
  fleet: LoadFleet;
  meter: CpuMeter;
  pids: number[];
  steps: StepResult[];
}

export interface FleetSize {
  workers: number;
  devices: number;
}

function cpuSources(sut: Sut, pids: number[], upstream: Upstream): Record<string, () => number> {
  // With several instances, each one's share too (`bridge-1`, `bridge-2` …) after the sum.
  const perInstance = pids.length > 1 ? Object.fromEntries(pids.map((pid, i) => [`${sut.role}-${i + 1}`, () => cpuSeconds(pid)])) : {};
  return {
    [sut.role]: () => sum(pids.map((pid) => cpuSeconds(pid))),
    generator: () => cpuSeconds('self'),
    upstream: () => cpuSeconds(upstream.child.pid!),
    ...sut.cpu,
    ...perInstance,
  };
}

export async function openSession(sut: Sut, plan: Plan, upstream: Upstream, size: FleetSize): Promise<Session> {
  const pids = sut.services.map((s) => s.child.pid!);
  const meter = new CpuMeter(cpuSources(sut, pids, upstream));
  const fleet = await startLoad({ host: '127.0.0.1', ports: sut.ports, devices: size.devices, workers: size.workers, mix: MIX, prefix: `bench-${sut.id}` });
  return { sut, plan, fleet, meter, pids, steps: [] };
}

/** The system's resident memory: the sum over its instances. */
export const sessionRss = (s: Session): number => sum(s.pids.map((pid) => rssMb(pid)));

/** `ttlMs`: every request carries that ttl_ms (none by default). */
export function runLoad(s: Session, rate: number, durationS: number, waitMs = s.plan.waitMs, leadS = 0, ttlMs?: number): Promise<StepSummary> {
  return s.fleet.step(rate, durationS + leadS, waitMs, {
    leadS,
    ...(ttlMs === undefined ? {} : { ttlMs }),
    onProgress: (p) => progress(`bench: ${s.sut.label} @ ${rate} req/s  ${p.elapsedS.toFixed(1)} s  sent ${p.sent}  answered ${p.answered}`),
  });
}

function toStep(s: StepSummary, cpu: Record<string, number>, rss: number): StepResult {
  const errorCount = Object.values(s.errors).reduce((a, b) => a + b, 0);
  // A generator that fell well behind its schedule did not offer the rate: that step says nothing.
  const offered = s.sent >= 0.97 * s.rate * s.durationS;
  return {
    rate: s.rate,
    durationS: s.durationS,
    sent: s.sent,
    answered: s.ok + errorCount,
    ok: s.ok,
    errors: s.errors,
    lost: s.lost,
    achievedRate: s.achievedRate,
    latencyMs: s.latencyMs,
    passed: offered && s.lost === 0 && errorCount === 0 && s.latencyMs.p99 < P99_LIMIT_MS,
    cpu,
    rssMb: rss,
  };
}

function logStep(sut: Sut, rate: number, step: StepResult): void {
  const perRequestUs = step.achievedRate > 0 ? Math.round(((step.cpu[sut.role] ?? 0) / step.achievedRate) * 1e6) : 0;
  log(
    `${sut.label} @ ${rate}: ${step.passed ? 'pass' : 'FAIL'}  ${step.achievedRate} replies/s  p50 ${step.latencyMs.p50} p99 ${step.latencyMs.p99} ms` +
      `  lost ${step.lost}  errors ${JSON.stringify(step.errors)}${step.shed ? `  shed ${JSON.stringify(step.shed)}` : ''}  cpu ${JSON.stringify(step.cpu)}  ${perRequestUs} µs/req  rss ${step.rssMb} MB` +
      (step.redis
        ? `\n  redis per request: ${step.redis.commands} commands, ${step.redis.calls} calls, ${step.redis.cpuUs} µs CPU; ${JSON.stringify(step.redis.top)}`
        : ''),
  );
}

/** Waits for the replies still owed, so what follows does not inherit a backlog. */
export async function drainBacklog(s: Session, what: string): Promise<void> {
  const owed = await s.fleet.drain(s.plan.drainMs, s.plan.drainStallMs);
  if (owed > 0) log(`${s.sut.label}: ${owed} ${what}; going on`);
}

/** One recorded step at `rate`, after its unrecorded lead-in. */
export async function measureStep(s: Session, rate: number): Promise<StepResult> {
  const { sut, plan } = s;
  const shedBefore = await sut.shed?.();
  const commandsBefore = await sut.redisCommands?.();
  s.meter.begin();
  const summary = await runLoad(s, rate, plan.stepS, plan.waitMs, plan.leadS);
  const step = toStep(summary, s.meter.end(), sessionRss(s));
  endProgress();
  if (sut.shed && shedBefore) step.shed = countsSince(shedBefore, await sut.shed());
  if (sut.redisCommands && commandsBefore) {
    const perRequest = redisOfStep(step, commandsBefore, await sut.redisCommands());
    if (perRequest) step.redis = perRequest;
  }
  logStep(sut, rate, step);
  s.steps.push(step);
  if (!step.passed) {
    await drainBacklog(s, 'replies owed so far will not come (dropped connections or stalled)');
    await sleep(plan.settleMs);
  }
  return step;
}
