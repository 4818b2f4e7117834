// What every part of the Store contract shares: jobs and replies built the way the bridge
// builds them, claim options, the base time, and the store each case opens.
import { expect } from 'vitest';
import type { Priority, Reply } from '../../../contract/index.js';
import { DEFAULT_PRIORITY_OFFSETS_MS } from '../../../bridge/config/config.js';
import type { AdmitLimits, ClaimOptions, DeadLetter, DeadLetterBounds, Lead, Store } from '../../../bridge/store/port.js';
import type { ClaimedJob, Job } from '../../../bridge/model/job.js';
import { jobKey } from '../../../bridge/model/job.js';
import { BUCKET_MS } from '../../../bridge/store/sliding-window.js';

export const MINUTE = 60_000;

/** When a call or admission made at `at` leaves its rolling minute: the end of its bucket, plus a minute. */
export const leaves = (at: number): number => Math.ceil(at / BUCKET_MS) * BUCKET_MS + MINUTE;
export const LIMITS: AdmitLimits = { deviceRpm: 1000, queueMax: 1000 };
export const DONE = { ttlS: 3600, deadLetter: false };
export const LEASE = 30_000;

/** What a case may set on the store it opens (both stores take it). */
export interface StoreOptions {
  deadLetters?: DeadLetterBounds;
}

/** What a part of the contract gets from the suite. */
export interface ContractContext {
  /** A fresh store, cleaned up after the case. */
  open(options?: StoreOptions): Promise<Store>;
  /** What the implementation under test must report as `durable`. */
  durable: boolean;
}

export interface MakeJobOptions {
  deviceId: string;
  id: string;
  priority: Priority;
  arrivalMs: number;
  /** The class's aging offset; default: PRIORITY_OFFSETS_MS's default for `priority`. */
  offsetMs?: number;
  lock?: string;
  deadlineMs?: number;
  tokenEstimate?: number;
  /** Distinguishes two payloads under one (deviceId, id). */
  content?: string;
}

/** A job built the way intake builds one: score = arrival + the class's offset. */
export function makeJob(o: MakeJobOptions): Job {
  return {
    key: jobKey(o.deviceId, o.id),
    deviceId: o.deviceId,
    id: o.id,
    priority: o.priority,
    request: {
      id: o.id,
      messages: [{ role: 'user', content: o.content ?? `question ${o.id}` }],
      max_tokens: 16,
      ...(o.lock === undefined ? {} : { lock: o.lock }),
    },
    arrivalMs: o.arrivalMs,
    score: o.arrivalMs + (o.offsetMs ?? DEFAULT_PRIORITY_OFFSETS_MS[o.priority]),
    deadlineMs: o.deadlineMs,
    tokenEstimate: o.tokenEstimate ?? 10,
    attempts: 0,
  };
}

export function makeReply(job: Job, content = `answer to ${job.id}`): Reply {
  return {
    id: job.id,
    ok: true,
    model: 'gpt-4o-mini',
    content,
    finish_reason: 'stop',
    usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
    cached: false,
    attempts: 1,
    priority: job.priority,
    timing: { queued_ms: 2, upstream_ms: 40, total_ms: 43 },
  };
}

export const errorReply = (job: Job, code: 'expired' | 'upstream_error'): Reply => ({
  id: job.id,
  ok: false,
  priority: job.priority,
  error: { code, message: `${code} for ${job.id}` },
});

/** A base time near the real clock, on a whole minute so window arithmetic reads plainly. */
export const baseTime = (): number => Math.floor(Date.now() / MINUTE) * MINUTE;

export const leadOneOf = async (store: Store, cacheKey: string, key: string, now: number, leaseMs = LEASE): Promise<Lead | undefined> =>
  (await store.answers.lead([{ cacheKey, jobKey: key }], leaseMs, now))[0];

export const claimOpts = (o: Partial<ClaimOptions> = {}): ClaimOptions => ({
  owner: 'worker-1',
  max: 10,
  leaseMs: LEASE,
  rpm: 100_000,
  tpm: undefined,
  ...o,
});

export const ids = (jobs: Job[]): string[] => jobs.map((j) => j.id);

/** The job as the store hands it back: the same data (a JSON round trip may drop `undefined` fields). */
export const sameJob = (actual: Job, expected: Job): void => {
  const { owner: _o, fence: _f, callId: _c, ...data } = actual as ClaimedJob;
  expect(data).toEqual(expected);
};

/** Admits jobs that must all be queued. */
export const admitAll = async (store: Store, jobs: Job[], now?: number): Promise<void> => {
  for (const job of jobs) {
    expect(await store.queue.admit(job, LIMITS, now ?? job.arrivalMs)).toEqual({ kind: 'queued' });
  }
};

/** One job (d1/r-1 unless `o` says otherwise) admitted and claimed by `owner` with a 1 s lease. */
export async function admitAndClaim(store: Store, t: number, o: Partial<MakeJobOptions> = {}, owner = 'worker-1'): Promise<{ job: Job; held: ClaimedJob }> {
  const job = makeJob({ deviceId: 'd1', id: 'r-1', priority: 'normal', arrivalMs: t, ...o });
  await admitAll(store, [job]);
  const { jobs } = await store.queue.claim(claimOpts({ leaseMs: 1000, owner }), t);
  expect(ids(jobs)).toEqual([job.id]);
  expect(jobs[0]?.recordedReply).toBeUndefined();
  return { job, held: jobs[0] as ClaimedJob };
}

/** Every dead letter, oldest first, read a page at a time as an operator's tool reads them. */
export async function allDeadLetters(store: Store, now = Date.now()): Promise<DeadLetter[]> {
  const all: DeadLetter[] = [];
  let after: string | undefined;
  do {
    const page = await store.operations.deadLetters.page(3, after, now);
    all.push(...page.entries);
    after = page.next;
  } while (after !== undefined);
  return all;
}
