// Pure bookkeeping for the device fleet: outcome tallies, percentiles and the report object
// (also the `--json` output) every engine ends with; summary.ts prints it. No I/O.
import { PRIORITIES, PrioritySchema, type Priority } from '../contract/index.js';
import { answeredOf, emptyDiagnosis, hints, type Diagnosis } from './diagnosis.js';

/** Relative weights per priority; a priority left out of a `--mix` weighs 0. */
export type Mix = Record<Priority, number>;

export interface LatencySummary {
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

/** What requests came to; every fleet, load step and benchmark figure counts the same way. */
export interface ReplyCounts {
  sent: number;
  ok: number;
  /** Error replies by contract error code (plus what the generator itself could not read). */
  errors: Record<string, number>;
  /** No reply within the wait. */
  lost: number;
}

/**
 * A request that carries `ttl_ms` is owed its reply, ok or `expired`, by its deadline: the
 * bridge's arrival + ttl_ms, which the device reads as its own publish + ttl_ms. A reply more
 * than this after that is late (docs/CONTRACT.md, issue 14).
 */
export const LATE_AFTER_DEADLINE_MS = 100;

/** Whether a reply `latencyMs` after its publish broke the deadline promise of a `ttlMs` request. */
export function isLate(latencyMs: number, ttlMs: number | undefined): boolean {
  return ttlMs !== undefined && latencyMs > ttlMs + LATE_AFTER_DEADLINE_MS;
}

export interface Row extends ReplyCounts {
  /** `expired` error replies (also in `errors`): the ttl_ms passed before an upstream call started. */
  expired: number;
  /** Replies, ok or not, more than LATE_AFTER_DEADLINE_MS after publish + ttl_ms; 0 without a ttl. */
  late: number;
  /** Over answered requests (ok and error replies); null when none was answered. */
  latencyMs: LatencySummary | null;
  /** Replies (ok + errors) per second of the run. */
  achievedRate: number;
  /** With --stream: publish to the first chunk of text, over the requests that had one (a cached answer has none). */
  firstChunkMs?: LatencySummary | null;
}

export interface ReportConfig {
  /** Broker URL with any credentials removed. */
  url: string;
  devices: number;
  rate: number;
  durationS: number;
  mix: Mix;
  qos: 0 | 1 | 2;
  replyTimeoutMs: number;
  prefix: string;
  /** The ttl_ms every request carried; absent when none did. */
  ttlMs?: number;
  /** Every request asked for its text streamed (--stream). */
  stream?: true;
  /** The engine: 0 = mqtt.js in one thread, else --workers N (raw frames, HDR histograms). */
  workers: number;
  /** The devices spoke MQTT 5 (--mqtt5); 3.1.1 otherwise. */
  mqtt5?: true;
  /** The devices were edge-ai-bridge/client users (--client). */
  client?: true;
}

export interface FleetReport {
  overall: Row;
  byPriority: Record<Priority, Row>;
  /** Measured: from the first send to the last reply (or the end of sending, if later). */
  durationS: number;
  config: ReportConfig;
  /** What the devices saw besides replies (status, refusals, drops). */
  diagnosis: Diagnosis;
  /** What to look at, drawn from the diagnosis; empty when all went well. */
  hints: string[];
}

/** Raw counts for one priority, accumulated during a run. */
export interface PriorityTally {
  sent: number;
  ok: number;
  errors: Record<string, number>;
  lost: number;
  /** Replies after the deadline + LATE_AFTER_DEADLINE_MS (see isLate). */
  late: number;
  latencies: number[];
  /** Publish to the first stream chunk, per streamed request that had one. */
  firstChunks: number[];
}

export type Tally = Record<Priority, PriorityTally>;

export type Outcome = { ok: true } | { ok: false; code: string };

export function emptyTally(): Tally {
  const make = (): PriorityTally => ({ sent: 0, ok: 0, errors: {}, lost: 0, late: 0, latencies: [], firstChunks: [] });
  return { critical: make(), high: make(), normal: make(), low: make() };
}

export function recordSent(tally: Tally, priority: Priority): void {
  tally[priority].sent += 1;
}

/** A reply `latencyMs` after its publish; `ttlMs`, the request's ttl_ms if it carried one, tells a late reply. */
export function recordReply(tally: Tally, priority: Priority, outcome: Outcome, latencyMs: number, ttlMs?: number): void {
  const t = tally[priority];
  if (outcome.ok) t.ok += 1;
  else t.errors[outcome.code] = (t.errors[outcome.code] ?? 0) + 1;
  if (isLate(latencyMs, ttlMs)) t.late += 1;
  t.latencies.push(latencyMs);
}

/** A streamed request's first chunk of text, `latencyMs` after its publish. */
export function recordFirstChunk(tally: Tally, priority: Priority, latencyMs: number): void {
  tally[priority].firstChunks.push(latencyMs);
}

/** A client-side failure (e.g. the publish itself failed): an error without a latency. */
export function recordFailure(tally: Tally, priority: Priority, code: string): void {
  const t = tally[priority];
  t.errors[code] = (t.errors[code] ?? 0) + 1;
}

export function recordLost(tally: Tally, priority: Priority, count = 1): void {
  tally[priority].lost += count;
}

/**
 * Nearest-rank percentile of ascending-sorted values: the smallest value with at least
 * p% of the values at or below it. Always an observed value, never an interpolation.
 */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) throw new RangeError('percentile of an empty list');
  if (!(p > 0 && p <= 100)) throw new RangeError(`percentile must be in (0, 100], got ${p}`);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] as number;
}

export function summarizeLatencies(values: readonly number[]): LatencySummary | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const round = (v: number): number => Math.round(v * 10) / 10;
  return {
    p50: round(percentile(sorted, 50)),
    p95: round(percentile(sorted, 95)),
    p99: round(percentile(sorted, 99)),
    max: round(sorted[sorted.length - 1] as number),
  };
}

function buildRow(parts: readonly PriorityTally[], durationS: number, stream: boolean): Row {
  const errors: Record<string, number> = {};
  let sent = 0;
  let ok = 0;
  let lost = 0;
  let late = 0;
  const latencies: number[] = [];
  for (const p of parts) {
    sent += p.sent;
    ok += p.ok;
    lost += p.lost;
    late += p.late;
    for (const [code, n] of Object.entries(p.errors)) errors[code] = (errors[code] ?? 0) + n;
    for (const l of p.latencies) latencies.push(l);
  }
  const replies = latencies.length;
  const achievedRate = durationS > 0 ? Math.round((replies / durationS) * 100) / 100 : 0;
  // Keep error codes in a stable order so JSON output diffs cleanly between runs.
  const sortedErrors = Object.fromEntries(Object.entries(errors).sort(([a], [b]) => a.localeCompare(b)));
  const expired = errors.expired ?? 0;
  const row: Row = { sent, ok, errors: sortedErrors, lost, expired, late, latencyMs: summarizeLatencies(latencies), achievedRate };
  if (stream) row.firstChunkMs = summarizeLatencies(parts.flatMap((p) => p.firstChunks));
  return row;
}

export function buildReport(tally: Tally, durationS: number, config: ReportConfig, diagnosis = emptyDiagnosis(false)): FleetReport {
  const byPriority = {} as Record<Priority, Row>;
  const stream = config.stream === true;
  for (const p of PRIORITIES) byPriority[p] = buildRow([tally[p]], durationS, stream);
  const overall = buildRow(
    PRIORITIES.map((p) => tally[p]),
    durationS,
    stream,
  );
  return {
    overall,
    byPriority,
    durationS: Math.round(durationS * 1000) / 1000,
    config,
    diagnosis,
    hints: hints(diagnosis, answeredOf(overall.ok, overall.errors)),
  };
}

/**
 * Parses `critical=1,high=9,normal=80,low=10`. Omitted priorities weigh 0; at least one
 * weight must be positive. Throws an Error whose message says what is wrong.
 */
export function parseMix(text: string): Mix {
  const mix: Mix = { critical: 0, high: 0, normal: 0, low: 0 };
  const seen = new Set<Priority>();
  const items = text.split(',').map((s) => s.trim());
  for (const item of items) {
    if (item === '') throw new Error(`empty entry in "${text}"`);
    const eq = item.indexOf('=');
    if (eq === -1) throw new Error(`"${item}" is not priority=weight`);
    const name = item.slice(0, eq).trim();
    const parsed = PrioritySchema.safeParse(name);
    if (!parsed.success) throw new Error(`unknown priority "${name}" (expected one of ${PRIORITIES.join(', ')})`);
    if (seen.has(parsed.data)) throw new Error(`priority "${name}" given twice`);
    seen.add(parsed.data);
    const raw = item.slice(eq + 1).trim();
    const weight = Number(raw);
    if (raw === '' || !Number.isFinite(weight) || weight < 0) {
      throw new Error(`weight of "${name}" must be a non-negative number, got "${raw}"`);
    }
    mix[parsed.data] = weight;
  }
  if (PRIORITIES.every((p) => mix[p] === 0)) throw new Error('at least one weight must be positive');
  return mix;
}

export function formatMix(mix: Mix): string {
  return PRIORITIES.filter((p) => mix[p] > 0)
    .map((p) => `${p}=${mix[p]}`)
    .join(',');
}

/** Picks a priority with probability proportional to its weight; `random` returns [0, 1). */
export function pickPriority(mix: Mix, random: () => number): Priority {
  const total = PRIORITIES.reduce((acc, p) => acc + mix[p], 0);
  let x = random() * total;
  let last: Priority = 'normal';
  for (const p of PRIORITIES) {
    if (mix[p] <= 0) continue;
    last = p;
    if (x < mix[p]) return p;
    x -= mix[p];
  }
  // Floating-point rounding can leave x a hair above the last bucket.
  return last;
}
