// The oracles a run is judged by, each with its bound, and the report's tables.
import type { KindStats } from './attacker.js';
import type { Kind } from './inputs/actions.js';
import type { InnocentRequest, Phase } from './innocent.js';
import type { ProbeLog } from './probes.js';
import type { RedisSample } from './redis-sample.js';

/** A baseline p99 below this counts as this much: 2 × a few ms would fail on any scheduling hiccup. */
export const BASELINE_FLOOR_MS = 200;
/** Keys one attacker device may leave behind past the drain (its quota window, budget counters). */
export const KEYS_PER_ATTACKER = 4;
/** Keys of the deployment itself that may appear during a run (usage hours, breaker state). */
export const KEYS_FIXED = 10;
/** Entries one hash, list, set or sorted set may gain over the run (the dead letters: up to DLQ_MAX). */
export const ENTRIES_SLACK = 32;
/**
 * Rolling windows (the upstream's budget, each device's quota): 2 fields per 2 s bucket over
 * 60 s (a bucket counts until all of it has left: 31 buckets), 3 totals and the upstream's pause.
 */
export const WINDOW_FIELDS = 2 * 31 + 4;
/** Usage hours: 4 fields (requests, tokens in and out, cost) per answered (device, model, priority). */
export const USAGE_FIELDS_PER_ANSWER = 4;
export const BYTES_SLACK = 256 * 1024;

export interface Latency {
  requests: number;
  p50: number;
  p99: number;
  max: number;
}

export interface Oracle {
  name: string;
  bound: string;
  measured: string;
  pass: boolean;
}

export interface Judged {
  latency: Record<Exclude<Phase, 'warmup'>, Latency>;
  outcomes: Record<string, number>;
  oracles: Oracle[];
}

export interface Evidence {
  requests: InnocentRequest[];
  /** Replies the innocent device got that answer none of its requests. */
  foreignReplies: number;
  endedAt: number;
  exitCode: number | null | 'running';
  probes: ProbeLog;
  before: RedisSample;
  after: RedisSample;
  iterations: Partial<Record<Kind, KindStats>>;
  attackerReplies: Record<string, number>;
  kinds: readonly Kind[];
  attackers: number;
  dlqMax: number;
  dlqMaxBytes: number;
  /** The dead letters' index and entries, bounded by DLQ_MAX. */
  dlqKeys: string[];
  /** Key → its family (redis-sample.ts keyFamily). */
  family: (key: string) => string;
}

function quantile(sorted: number[], q: number): number {
  return sorted.length === 0 ? NaN : (sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * q) - 1)] as number);
}

/** An unanswered request counts with the time it has waited by the end of the run. */
function latency(requests: InnocentRequest[], endedAt: number): Latency {
  const ms = requests.map((r) => r.latencyMs ?? endedAt - r.sentAt).sort((a, b) => a - b);
  return { requests: ms.length, p50: quantile(ms, 0.5), p99: quantile(ms, 0.99), max: ms[ms.length - 1] ?? NaN };
}

function boundOf(e: Evidence, key: string, before: number): number {
  if (e.dlqKeys.includes(key)) return e.dlqMax;
  const family = e.family(key);
  if (family === 'budget' || family === 'quota') return Math.max(WINDOW_FIELDS, before);
  // An hour's usage report grows with the devices served (each answer paid by its device's quota), and ends with the hour.
  if (family === 'usage') return before + ENTRIES_SLACK + USAGE_FIELDS_PER_ANSWER * (e.attackerReplies['ok'] ?? 0);
  return before + ENTRIES_SLACK;
}

function grownCollections(e: Evidence): string[] {
  const before = e.before.entries ?? {};
  return Object.entries(e.after.entries ?? {})
    .filter(([key, n]) => n > boundOf(e, key, before[key] ?? 0))
    .map(([key, n]) => `${key} ${before[key] ?? 0}→${n}`);
}

export function judge(e: Evidence): Judged {
  const phase = (p: Exclude<Phase, 'warmup'>): InnocentRequest[] => e.requests.filter((r) => r.phase === p);
  const lat = { baseline: latency(phase('baseline'), e.endedAt), attack: latency(phase('attack'), e.endedAt), drain: latency(phase('drain'), e.endedAt) };
  const outcomes: Record<string, number> = {};
  for (const r of e.requests) outcomes[r.outcome ?? 'unanswered'] = (outcomes[r.outcome ?? 'unanswered'] ?? 0) + 1;
  const notOk = e.requests.length - (outcomes.ok ?? 0);
  const p99Bound = 2 * Math.max(lat.baseline.p99, BASELINE_FLOOR_MS);
  const probeFailures = e.probes.failures.map((f) => `${f.path} ${f.got}`);
  const oracles: Oracle[] = [
    {
      name: 'innocent p99 during the attack',
      bound: `≤ 2 × max(baseline p99 ${lat.baseline.p99} ms, ${BASELINE_FLOOR_MS} ms) = ${p99Bound} ms`,
      measured: `${lat.attack.p99} ms (p50 ${lat.attack.p50} ms, ${lat.attack.requests} requests)`,
      pass: lat.attack.requests > 0 && lat.attack.p99 <= p99Bound,
    },
    {
      name: 'every innocent request answered ok',
      bound: 'all',
      measured: `${outcomes.ok ?? 0} of ${e.requests.length} ok${
        notOk > 0
          ? ` (${Object.entries(outcomes)
              .filter(([k]) => k !== 'ok')
              .map(([k, n]) => `${k} ${n}`)
              .join(', ')})`
          : ''
      }`,
      pass: notOk === 0 && e.requests.length > 0,
    },
    {
      name: 'innocent got only its own replies',
      bound: '0 replies to requests it did not send',
      measured: String(e.foreignReplies),
      pass: e.foreignReplies === 0,
    },
    {
      name: 'bridge process alive',
      bound: 'never exits',
      measured: e.exitCode === 'running' ? 'running' : `exited with ${e.exitCode}`,
      pass: e.exitCode === 'running',
    },
    {
      name: '/healthz and /readyz answered 200',
      bound: `every probe (1/s, ${3} s timeout)`,
      measured: `${e.probes.probes} probes, ${probeFailures.length} failures${probeFailures.length ? `: ${summarize(probeFailures)}` : ''}; longest /healthz gap ${e.probes.longestHealthGapMs} ms`,
      pass: probeFailures.length === 0 && e.probes.probes > 0,
    },
    ...leftoverOracles(e),
  ];
  return { latency: lat, outcomes, oracles };
}

/** What the attack may leave behind once drained: Redis keys, memory and collections, and inputs never tried. */
function leftoverOracles(e: Evidence): Oracle[] {
  const keysBound = e.before.keys + KEYS_FIXED + KEYS_PER_ATTACKER * e.attackers;
  const bytesBound = e.before.bytes + e.dlqMaxBytes + BYTES_SLACK;
  const grown = grownCollections(e);
  const idle = e.kinds.filter((k) => (e.iterations[k]?.iterations ?? 0) === 0);
  return [
    {
      name: 'Redis keys after the drain',
      bound: `≤ before ${e.before.keys} + ${KEYS_FIXED} + ${KEYS_PER_ATTACKER} × ${e.attackers} attackers = ${keysBound}`,
      measured: String(e.after.keys),
      pass: e.after.keys <= keysBound,
    },
    {
      name: 'Redis memory after the drain',
      bound: `≤ before ${kib(e.before.bytes)} + DLQ_MAX_BYTES ${kib(e.dlqMaxBytes)} + ${kib(BYTES_SLACK)} = ${kib(bytesBound)}`,
      measured: kib(e.after.bytes),
      pass: e.after.bytes <= bytesBound,
    },
    {
      name: 'no collection grew',
      bound: `each hash/list/set/zset ≤ its entries before + ${ENTRIES_SLACK} (dead letters ≤ DLQ_MAX ${e.dlqMax}, rolling windows ≤ ${WINDOW_FIELDS} fields, usage hours + ${USAGE_FIELDS_PER_ANSWER} per attacker answer)`,
      measured: grown.length === 0 ? 'none grew' : summarize(grown),
      pass: grown.length === 0,
    },
    {
      name: 'no attacker input answered internal',
      bound: '0: a fault of the input is named (invalid_request, payload_too_large, …)',
      measured: `${e.attackerReplies.internal ?? 0} of ${Object.values(e.attackerReplies).reduce((a, b) => a + b, 0)} replies`,
      pass: (e.attackerReplies.internal ?? 0) === 0,
    },
    {
      name: 'every input kind ran',
      bound: `${e.kinds.length} kinds`,
      measured: idle.length === 0 ? `${e.kinds.length} kinds` : `never ran: ${idle.join(', ')}`,
      pass: idle.length === 0,
    },
  ];
}

const kib = (bytes: number): string => `${(bytes / 1024).toFixed(0)} KiB`;

function summarize(items: string[]): string {
  const counts = new Map<string, number>();
  for (const item of items) counts.set(item, (counts.get(item) ?? 0) + 1);
  const parts = [...counts].map(([item, n]) => (n > 1 ? `${item} ×${n}` : item));
  return parts.length > 6 ? `${parts.slice(0, 6).join('; ')}; … ${parts.length - 6} more` : parts.join('; ');
}

export function oracleTable(oracles: Oracle[]): string {
  const row = (cells: string[]): string => `| ${cells.join(' | ')} |`;
  return [
    row(['oracle', 'bound', 'measured', 'result']),
    row(['---', '---', '---', '---']),
    ...oracles.map((o) => row([o.name, o.bound, o.measured, o.pass ? 'pass' : '**FAIL**'])),
  ].join('\n');
}

export function iterationTable(iterations: Partial<Record<Kind, KindStats>>, kinds: readonly Kind[]): string {
  const row = (cells: Array<string | number>): string => `| ${cells.join(' | ')} |`;
  const lines = kinds.map((k) => {
    const s = iterations[k];
    return row([k, s?.iterations ?? 0, s?.cutOff ?? 0, s?.noAck ?? 0, s?.refused ?? 0, s?.unencodable ?? 0]);
  });
  return [
    row(['input kind', 'iterations', 'cut off', 'no ack', 'refused', 'unencodable']),
    row(['---', '---:', '---:', '---:', '---:', '---:']),
    ...lines,
  ].join('\n');
}
