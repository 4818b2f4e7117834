// How the Redis store reads and writes what its Lua scripts keep: jobs, replies, cache
// entries and usage fields, as flat strings.
import { BridgeError, type Reply, ReplySchema } from '../../contract/index.js';
import type { LuaArg } from './lua-library.js';
import { addMetric, type UsageDimension, type UsageMetric } from './usage-report.js';
import { HOUR_MS, type AdmitResult, type CachedAnswer, type ClaimResult, type UsageReport } from './port.js';
import type { ClaimedJob, ExpiredJob, Job } from '../model/job.js';

/** Usage hours are kept about a week (a backstop; reports read what is there). */
const USAGE_KEEP_MS = 8 * 24 * HOUR_MS;

type JobData = Omit<Job, 'attempts'>;

/** expiresAt first, so lead.lua can compare it without decoding the answer. */
export function cacheValue(answer: CachedAnswer, ttlMs: number, now: number): string {
  return `${now + ttlMs}|${JSON.stringify(answer)}`;
}

/** usage.lua's ARGV: how long the hour is kept, then field, amount pairs. */
export function usageArgs(amounts: Map<string, number>): LuaArg[] {
  const args: LuaArg[] = [USAGE_KEEP_MS];
  for (const [field, amount] of amounts) args.push(field, amount);
  return args;
}
const USAGE_DIMENSIONS: Record<string, UsageDimension> = { d: 'byDevice', m: 'byModel', p: 'byPriority', t: 'byTemplate' };
const USAGE_METRICS: Record<string, UsageMetric> = { r: 'requests', p: 'promptTokens', c: 'completionTokens', usd: 'costUsd' };

/**
 * One usage field as (dimension, name, metric) triples: `device TAB model TAB priority TAB
 * metric` counts under all three dimensions (the model may hold a tab: it is what lies between
 * the device and the priority); `dimension TAB name TAB metric` is the one-dimension form (a
 * template's, `t`; and older releases' d, m, p).
 */
export function usageEntries(field: string): Array<[UsageDimension, string, UsageMetric]> {
  const parts = field.split('\t');
  const metric = USAGE_METRICS[parts.at(-1) ?? ''];
  if (!metric) return [];
  if (parts.length === 3) {
    const dimension = USAGE_DIMENSIONS[parts[0] ?? ''];
    return dimension ? [[dimension, parts[1] ?? '', metric]] : [];
  }
  if (parts.length < 4) return [];
  const [device = '', ...rest] = parts.slice(0, -1);
  const priority = rest.pop() ?? '';
  return [
    ['byDevice', device, metric],
    ['byModel', rest.join('\t'), metric],
    ['byPriority', priority, metric],
  ];
}

/** An admission script's answer: its outcome, then the reply, wait or cache entry where it has one. */
export function toAdmitResult([kind, detail]: [string, string?], script: string): AdmitResult {
  switch (kind) {
    case 'cached':
      return { kind, answer: JSON.parse(detail ?? 'null') as CachedAnswer };
    case 'queued':
    case 'answered':
    case 'duplicate_pending':
    case 'queue_full':
      return { kind };
    case 'duplicate_done':
      return { kind, reply: parseReply(detail) };
    case 'rate_limited':
      return { kind, retryAfterMs: Number(detail) };
    case 'late':
      // Redis got it after the bridge had given up on it: nothing was written.
      throw new BridgeError('unavailable', 'Redis answered too late');
    default:
      throw new BridgeError('internal', `${script} answered ${kind}`);
  }
}

/** A cache entry (`expiresAt|answer JSON`) while it is fresh; a coalescing flight (`F…`) holds no answer. */
export function readCached(raw: string | null, now: number): CachedAnswer | undefined {
  if (raw === null || raw.startsWith('F')) return undefined;
  const bar = raw.indexOf('|');
  return Number(raw.slice(0, bar)) > now ? (JSON.parse(raw.slice(bar + 1)) as CachedAnswer) : undefined;
}

/** claim.lua's answer (also admit.lua's, after a claim). */
export function toClaimResult(claimed: string[], expired: string[], retryAt: string, owner: string): ClaimResult {
  const jobs: ClaimedJob[] = [];
  for (let i = 0; i < claimed.length; i += 5) {
    const fence = claimed[i + 2];
    const job: ClaimedJob = { ...toJob(claimed[i], claimed[i + 1]), owner, fence: fence ? Number(fence) : undefined, callId: claimed[i + 3] ?? '' };
    const recorded = claimed[i + 4];
    if (recorded) job.recordedReply = parseRecorded(recorded);
    jobs.push(job);
  }
  const gone: ExpiredJob[] = [];
  for (let i = 0; i < expired.length; i += 3) {
    const job: ExpiredJob = toJob(expired[i], expired[i + 1]);
    const recorded = expired[i + 2];
    if (recorded) job.recordedReply = parseRecorded(recorded);
    gone.push(job);
  }
  return { jobs, expired: gone, retryAtMs: retryAt === '' ? undefined : Number(retryAt) };
}

export function toJob(data: string | undefined, attempts: string | undefined): Job {
  if (data === undefined) throw new BridgeError('internal', 'a queued job has no data in Redis');
  return { ...(JSON.parse(data) as JobData), attempts: Number(attempts ?? 0) };
}

export function toJobs(flat: string[]): Job[] {
  const jobs: Job[] = [];
  for (let i = 0; i < flat.length; i += 2) jobs.push(toJob(flat[i], flat[i + 1]));
  return jobs;
}

export function parseReply(raw: string | undefined): Reply {
  return ReplySchema.parse(JSON.parse(raw ?? 'null'));
}

/**
 * A recorded reply, as recordReply stored it: parsed without the schema, which would rebuild
 * it in the schema's key order, so that publishing it again gives the very same bytes.
 */
export function parseRecorded(raw: string | undefined): Reply {
  if (raw === undefined) throw new BridgeError('internal', 'a recorded reply is missing');
  return JSON.parse(raw) as Reply;
}

/** The idempotency record's reply while it is done and fresh (includes/admission.lua writes it). */
export function freshRecordedReply(raw: string | null, now: number): Reply | undefined {
  if (raw === null || !raw.startsWith('d')) return undefined;
  const bar = raw.indexOf('|');
  return Number(raw.slice(1, bar)) > now ? parseReply(raw.slice(bar + 1)) : undefined;
}

/**
 * The same from a record that is a hash: a job record answered while another holder had it
 * (x, y), or a record an older version wrote (state, exp, reply).
 */
export function freshOldRecordedReply([state, exp, reply, x, y]: Array<string | null>, now: number): Reply | undefined {
  if (x && y) return Number(x) > now ? parseReply(y) : undefined;
  return state === 'done' && Number(exp) > now && reply ? parseReply(reply) : undefined;
}

/** Adds one hour's usage hash (usage.lua's fields) to a report. */
export function addUsageFields(report: UsageReport, fields: Record<string, string>): void {
  for (const [field, value] of Object.entries(fields)) {
    for (const [dimension, name, metric] of usageEntries(field)) addMetric(report, dimension, name, metric, Number(value));
  }
}
