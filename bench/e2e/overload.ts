// The overload step: a bridge offered twice its highest passing rate must lose nothing,
// keep its memory bounded and still answer afterwards.
import { isAlive } from '../proc.js';
import type { OverloadResult } from '../results.js';
import { endProgress, log } from './console.js';
import { OVERLOAD_WAIT_MS, PROBE_WAIT_MS } from './plan.js';
import { runLoad, sessionRss, type Session } from './session.js';
import { countsSince } from './shed.js';

export async function overload(s: Session, rate: number): Promise<OverloadResult> {
  const { sut, plan } = s;
  const rssStartMb = sessionRss(s);
  const shedBefore = await sut.shed?.();
  const summary = await runLoad(s, rate, plan.overloadS, OVERLOAD_WAIT_MS);
  endProgress();
  const shed = sut.shed && shedBefore ? countsSince(shedBefore, await sut.shed()) : undefined;
  const alive = s.pids.every((pid) => isAlive(pid));
  const rssEndMb = alive ? sessionRss(s) : 0;
  // Alive is not enough: it must still answer.
  const probe = alive ? await s.fleet.step(100, 1, PROBE_WAIT_MS) : undefined;
  const result: OverloadResult = {
    rate,
    durationS: plan.overloadS,
    sent: summary.sent,
    ok: summary.ok,
    errors: summary.errors,
    lost: summary.lost,
    rssStartMb,
    rssEndMb,
    latencyMs: { p50: summary.latencyMs.p50, p99: summary.latencyMs.p99 },
    survived: alive && probe !== undefined && probe.lost === 0 && probe.ok === probe.sent,
    ...(shed ? { shed } : {}),
  };
  const shedText = shed ? ` shed ${JSON.stringify(shed)}` : '';
  log(
    `${sut.label} overload @ ${rate}: sent ${summary.sent} ok ${summary.ok} errors ${JSON.stringify(summary.errors)}${shedText} lost ${summary.lost}` +
      ` p50 ${summary.latencyMs.p50} p99 ${summary.latencyMs.p99} ms rss ${rssStartMb} → ${rssEndMb} MB survived ${result.survived}`,
  );
  return result;
}
