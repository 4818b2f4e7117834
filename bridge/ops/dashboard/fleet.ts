// An instance's report for one tick (what it shares through the store), and the fleet's view
// made of every live report: rates added up, histograms merged, the worst circuit and key
// state any instance sees.
import { PRIORITIES, type Priority } from '../../../contract/index.js';
import type { QueueDepth } from '../../store/port.js';
import type { AttemptCounts } from '../../upstream/attempt-stats.js';
import type { ProviderHealth } from '../../upstream/chain.js';
import { encode, mergedPercentiles, newHistogram, recordMs } from './histogram.js';
import type { InstanceView, KeyView, Point, ProviderView } from './model.js';
import type { TickCounts } from './recorder.js';

interface ProviderReport {
  provider: string;
  circuit: ProviderView['circuit'];
  available: boolean;
  keys: KeyView[];
  calls: number;
  failures: number;
  rateLimited: number;
  latency: string | null;
}

export interface InstanceReport {
  view: InstanceView;
  intervalMs: number;
  replies: Record<Priority, number>;
  outcomes: Record<string, number>;
  wait: Record<Priority, string | null>;
  e2e: Record<Priority, string | null>;
  providers: ProviderReport[];
}

const mapPriorities = <T>(f: (p: Priority) => T): Record<Priority, T> => Object.fromEntries(PRIORITIES.map((p) => [p, f(p)])) as Record<Priority, T>;

export function buildReport(
  view: InstanceView,
  counts: TickCounts,
  health: ProviderHealth[],
  attempts: Array<{ name: string } & AttemptCounts>,
): InstanceReport {
  return {
    view,
    intervalMs: Math.max(1, view.seenAt - counts.since),
    replies: counts.replies,
    outcomes: counts.outcomes,
    wait: mapPriorities((p) => encode(counts.wait[p])),
    e2e: mapPriorities((p) => encode(counts.e2e[p])),
    providers: health.map((h) =>
      providerReport(
        h,
        attempts.find((a) => a.name === h.name),
      ),
    ),
  };
}

function providerReport(health: ProviderHealth, attempts: AttemptCounts | undefined): ProviderReport {
  const latency = newHistogram();
  for (const ms of attempts?.latenciesMs ?? []) recordMs(latency, ms);
  return {
    provider: health.name,
    circuit: health.circuit,
    available: health.available,
    keys: health.keys.list,
    calls: attempts?.calls ?? 0,
    failures: attempts?.failures ?? 0,
    rateLimited: attempts?.rateLimited ?? 0,
    latency: encode(latency),
  };
}

export interface FleetView {
  point: Point;
  instances: InstanceView[];
  providers: ProviderView[];
}

/** `seconds`: the interval of the asking instance's own report. */
export function fleetView(reports: InstanceReport[], depth: QueueDepth | null, now: number, seconds: number): FleetView {
  const perS = (report: InstanceReport, n: number): number => (n * 1000) / report.intervalMs;
  const sum = (f: (r: InstanceReport) => number): number => round(reports.reduce((total, r) => total + f(r), 0));
  const outcomes: Point['outcomes'] = {};
  for (const name of new Set(reports.flatMap((r) => Object.keys(r.outcomes)))) {
    outcomes[name as keyof Point['outcomes']] = sum((r) => perS(r, r.outcomes[name] ?? 0));
  }
  const point: Point = {
    t: now,
    seconds: round(seconds),
    rps: mapPriorities((p) => sum((r) => perS(r, r.replies[p]))),
    outcomes,
    depth,
    wait: mapPriorities((p) => mergedPercentiles(reports.map((r) => r.wait[p]))),
    e2e: mapPriorities((p) => mergedPercentiles(reports.map((r) => r.e2e[p]))),
  };
  const instances = reports.map((r) => r.view).sort((a, b) => a.instance.localeCompare(b.instance));
  return { point, instances, providers: providerViews(reports) };
}

const CIRCUIT_ORDER: ProviderView['circuit'][] = ['closed', 'half-open', 'open'];
const KEY_ORDER: KeyView['state'][] = ['healthy', 'cooling', 'revoked'];
const worse = <T>(order: T[], a: T, b: T): T => (order.indexOf(b) > order.indexOf(a) ? b : a);

/** Each provider across instances: its worst circuit and key states, its rates added up. */
function providerViews(reports: InstanceReport[]): ProviderView[] {
  const names = [...new Set(reports.flatMap((r) => r.providers.map((p) => p.provider)))];
  return names.map((provider) => {
    const seen = reports.flatMap((r) => r.providers.filter((p) => p.provider === provider).map((p) => ({ p, intervalMs: r.intervalMs })));
    const rate = (f: (p: ProviderReport) => number): number => round(seen.reduce((t, { p, intervalMs }) => t + (f(p) * 1000) / intervalMs, 0));
    const keys = new Map<string, KeyView['state']>();
    for (const { p } of seen) for (const k of p.keys) keys.set(k.id, worse(KEY_ORDER, keys.get(k.id) ?? 'healthy', k.state));
    const calls = seen.reduce((t, { p }) => t + p.calls, 0);
    const failures = seen.reduce((t, { p }) => t + p.failures, 0);
    return {
      provider,
      circuit: seen.reduce<ProviderView['circuit']>((c, { p }) => worse(CIRCUIT_ORDER, c, p.circuit), 'closed'),
      available: seen.some(({ p }) => p.available),
      keys: [...keys].map(([id, state]) => ({ id, state })),
      callsPerS: rate((p) => p.calls),
      errorRate: calls === 0 ? null : round(failures / calls, 4),
      rateLimitedPerS: rate((p) => p.rateLimited),
      latency: mergedPercentiles(seen.map(({ p }) => p.latency)),
    };
  });
}

function round(n: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}
