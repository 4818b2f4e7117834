// The measurement of one system: warm-up, then the step search for the highest rate it
// sustains (a ladder of rates until one fails, then bisection of the gap), then, for the
// bridges, the overload step at twice that rate; and the overload step alone on a fresh system
// (the same bridge with other settings).
import type { OverloadResult, StepResult, SystemResult } from '../results.js';
import { overload } from './overload.js';
import { RATE_ROUNDING, UPSTREAM_LATENCY_MS, type Plan } from './plan.js';
import { drainBacklog, measureStep, openSession, runLoad, sessionRss, type FleetSize, type Session } from './session.js';
import type { Sut } from './systems.js';
import type { Upstream } from './upstream.js';

/**
 * JIT, heap, connections and scripts, not recorded: a cold system needs seconds of load
 * before its code is optimised, and a first step would measure that.
 */
async function warmUp(s: Session): Promise<void> {
  await runLoad(s, 1000, s.plan.warmUpS[0]);
  await runLoad(s, 2000, s.plan.warmUpS[1]);
  // A system whose knee is below the warm-up rate (a plant instance) still owes a backlog.
  await drainBacklog(s, 'warm-up replies owed will not come');
}

interface Search {
  best: StepResult | undefined;
  failedAt: number | undefined;
}

/** Rates in turn until one fails; with fixed rates, every rate whatever the outcome. */
async function climbLadder(s: Session): Promise<Search> {
  const search: Search = { best: undefined, failedAt: undefined };
  for (const rate of s.plan.ladder) {
    const step = await measureStep(s, rate);
    if (step.passed) search.best = step;
    else if (!s.plan.fixed) {
      search.failedAt = rate;
      break;
    }
  }
  return search;
}

/** Halves the gap between the highest pass and the first failure, `plan.bisections` times. */
async function bisect(s: Session, search: Search): Promise<void> {
  for (let i = 0; i < s.plan.bisections && search.failedAt !== undefined; i += 1) {
    const low = search.best?.rate ?? 0;
    const rate = Math.round((low + search.failedAt) / 2 / RATE_ROUNDING) * RATE_ROUNDING;
    if (rate <= low || rate >= search.failedAt) break;
    const step = await measureStep(s, rate);
    if (step.passed) search.best = step;
    else search.failedAt = rate;
  }
}

function summarize(s: Session, best: StepResult | undefined): SystemResult {
  const at1000 = s.steps.find((step) => step.rate === 1000);
  const upstreamMs = s.sut.id === 'echo' ? 0 : UPSTREAM_LATENCY_MS;
  const over = (ms: number): number => Math.round((ms - upstreamMs) * 10) / 10;
  return {
    id: s.sut.id,
    label: s.sut.label,
    maxRate: best?.rate ?? 0,
    overheadAt1000Ms: at1000
      ? { p50: over(at1000.latencyMs.p50), p95: over(at1000.latencyMs.p95), p99: over(at1000.latencyMs.p99), max: over(at1000.latencyMs.max) }
      : null,
    cpuAtMax: best?.cpu ?? {},
    rssMb: best?.rssMb ?? sessionRss(s),
    steps: s.steps,
  };
}

export async function measureSystem(sut: Sut, plan: Plan, upstream: Upstream, size: FleetSize): Promise<SystemResult> {
  const s = await openSession(sut, plan, upstream, size);
  try {
    await warmUp(s);
    if (plan.overloadRate !== undefined) {
      const result = summarize(s, undefined);
      if (sut.role === 'bridge') result.overload = [await overload(s, plan.overloadRate)];
      return result;
    }
    const search = await climbLadder(s);
    await bisect(s, search);
    const result = summarize(s, search.best);
    if (sut.role === 'bridge' && search.best && !plan.fixed) result.overload = [await overload(s, search.best.rate * 2)];
    return result;
  } finally {
    await s.fleet.close();
  }
}

/** The overload step at `rate` after the warm-up, without a step search: a fresh system with other settings. */
export async function overloadAlone(sut: Sut, plan: Plan, upstream: Upstream, size: FleetSize, rate: number): Promise<OverloadResult> {
  const s = await openSession(sut, plan, upstream, size);
  try {
    await warmUp(s);
    return await overload(s, rate);
  } finally {
    await s.fleet.close();
  }
}
