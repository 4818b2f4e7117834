// The overload step: a bridge offered twice its highest passing rate must lose nothing,
// keep its memory bounded and still answer afterwards; with a ttl_ms on every request, each
// must be answered, ok or `expired`, by its deadline (+ 100 ms: later is counted `late`).
import { PRIORITIES } from '../../contract/index.js';
import type { StepSummary } from '../../device-sim/load.js';
import { isAlive } from '../proc.js';
import { overloadSettings } from '../report.js';
import type { OverloadResult } from '../results.js';
import { endProgress, log } from './console.js';
import { OVERLOAD_WAIT_MS, PROBE_WAIT_MS } from './plan.js';
import { runLoad, sessionRss, type Session } from './session.js';
import { countsSince } from './shed.js';

export async function overload(s: Session, rate: number): Promise<OverloadResult> {
  const { sut, plan } = s;
  const rssStartMb = sessionRss(s);
  const shedBefore = await sut.shed?.();
  const ttlMs = plan.overloadTtlMs > 0 ? plan.overloadTtlMs : undefined;
  const summary = await runLoad(s, rate, plan.overloadS, OVERLOAD_WAIT_MS, 0, ttlMs);
  endProgress();
  const shed = sut.shed && shedBefore ? countsSince(shedBefore, await sut.shed()) : undefined;
  const alive = s.pids.every((pid) => isAlive(pid));
  const rssEndMb = alive ? sessionRss(s) : 0;
  // Alive is not enough: it must still answer.
  const probe = alive ? await s.fleet.step(100, 1, PROBE_WAIT_MS) : undefined;
  const result: OverloadResult = {
    rate,
    durationS: plan.overloadS,
    ...(sut.queueWaitMs === undefined ? {} : { queueWaitMs: sut.queueWaitMs }),
    ...(ttlMs === undefined ? {} : { ttlMs }),
    sent: summary.sent,
    ok: summary.ok,
    errors: summary.errors,
    lost: summary.lost,
    expired: summary.errors.expired ?? 0,
    late: summary.late,
    byPriority: byPriority(summary),
    rssStartMb,
    rssEndMb,
    latencyMs: { p50: summary.latencyMs.p50, p99: summary.latencyMs.p99 },
    survived: alive && probe !== undefined && probe.lost === 0 && probe.ok === probe.sent,
    ...(shed ? { shed } : {}),
  };
  logOverload(s, result);
  if (!result.survived) {
    const why = probe ? `sent ${probe.sent} ok ${probe.ok} errors ${JSON.stringify(probe.errors)} lost ${probe.lost}` : 'the process is gone';
    log(`${sut.label}: the probe after the overload step failed: ${why}`);
  }
  return result;
}

function byPriority(summary: StepSummary): OverloadResult['byPriority'] {
  const entries = PRIORITIES.map((p) => {
    const { expired, late, latencyMs } = summary.byPriority[p];
    return [p, { expired, late, latencyMs: latencyMs && { p50: latencyMs.p50, p99: latencyMs.p99 } }] as const;
  });
  return Object.fromEntries(entries) as OverloadResult['byPriority'];
}

function logOverload(s: Session, o: OverloadResult): void {
  const shedText = o.shed ? ` shed ${JSON.stringify(o.shed)}` : '';
  const lateBy = PRIORITIES.filter((p) => o.byPriority[p].late > 0).map((p) => `${p} ${o.byPriority[p].late}`);
  const late = o.ttlMs === undefined ? '' : ` late ${o.late}${lateBy.length > 0 ? ` (${lateBy.join(', ')})` : ''}`;
  log(
    `${s.sut.label} overload @ ${o.rate} (${overloadSettings(o)}): sent ${o.sent} ok ${o.ok} errors ${JSON.stringify(o.errors)}${shedText}` +
      ` lost ${o.lost} expired ${o.expired}${late}` +
      ` p50 ${o.latencyMs.p50} p99 ${o.latencyMs.p99} ms rss ${o.rssStartMb} → ${o.rssEndMb} MB survived ${o.survived}`,
  );
}
