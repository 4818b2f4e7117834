// Record, publish, complete (bridge/results/completion.ts): a job's reply is recorded before it is
// published, so whoever takes the job over after a crash publishes that same reply instead of
// asking the upstream again. A scheduler over each store, a fake upstream and a fake broker.
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ERROR_CODES, type ErrorCode, type Publish, type Reply } from '../../contract/index.js';
import { createLogger } from '../../bridge/logger.js';
import { leaseMsFor } from '../../bridge/recovery/leases.js';
import { Results } from '../../bridge/results/results.js';
import { deadLettered } from '../../bridge/results/completion.js';
import { Scheduler, type SchedulerConfig, type Upstream } from '../../bridge/scheduling/scheduler.js';
import { MemoryStore } from '../../bridge/store/memory.js';
import { RedisStore } from '../../bridge/store/redis.js';
import type { ClaimedJob, Job } from '../../bridge/model/job.js';
import type { Store } from '../../bridge/store/port.js';
import { logSink } from '../helpers/log-sink.js';
import { connectRedis, deletePrefix, uniquePrefix } from '../helpers/redis.js';
import { makeJob, makeReply } from '../store/store-contract.js';
import { eventually } from '../helpers/wait.js';

const CONFIG: SchedulerConfig = {
  maxConcurrency: 4,
  upstreamTimeoutMs: 1000,
  rateLimitRpm: 100_000,
  rateLimitTpm: undefined,
  maxAttempts: 3,
  idempotencyTtlS: 3600,
  upstreamModel: 'gpt-4o-mini',
  cacheTtlS: 60,
  prices: {},
  embeddingModel: 'text-embedding-3-small',
};
const LEASE_MS = leaseMsFor(CONFIG.upstreamTimeoutMs); // the scheduler's
const LIMITS = { deviceRpm: 1000, queueMax: 1000 };

const until = (check: () => boolean, ms = 3000): Promise<void> => eventually('the condition', check, ms);
/** The scheduler's runs have ended: every reply recorded, published (or failed to) and completed. */
const settled = (s: Scheduler): Promise<void> => eventually('the runs to end', () => s.inFlight === 0);

/** An upstream that answers every call with a new content, optionally after `gate`. */
function fakeUpstream() {
  const calls: string[] = [];
  let gate: Promise<void> = Promise.resolve();
  const upstream: Upstream = {
    async call(call) {
      calls.push(call.requestId);
      await call.beforeAttempt?.(1);
      await gate;
      return {
        model: 'gpt-4o-mini',
        content: `fresh answer ${calls.length}`,
        finish_reason: 'stop',
        usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
        attempts: 1,
        upstreamMs: 5,
        provider: 'primary',
      };
    },
  };
  return { calls, upstream, hold: (p: Promise<void>) => (gate = p) };
}

/** A broker that fails the first `failures` publishes; `sent` holds the payloads of the others. */
function fakeBroker(failures = 0) {
  const sent: string[] = [];
  let left = failures;
  const publish: Publish = async (_topic, payload) => {
    if (left > 0) {
      left -= 1;
      throw new Error('broker gone');
    }
    sent.push(payload.toString('utf8'));
  };
  return { sent, results: new Results(publish) };
}

const redis = connectRedis();
afterAll(() => redis.disconnect());

const STORES: Array<[string, () => Promise<{ store: Store; cleanup: () => Promise<void> }>]> = [
  ['memory', async () => ({ store: new MemoryStore(), cleanup: async () => undefined })],
  [
    'redis',
    async () => {
      const prefix = uniquePrefix('completion');
      return { store: new RedisStore(redis, { prefix }), cleanup: () => deletePrefix(redis, prefix) };
    },
  ],
];

describe.each(STORES)('record before publishing (%s store)', (_name, makeStore) => {
  const cleanups: Array<() => Promise<void>> = [];
  const schedulers: Scheduler[] = [];
  afterEach(async () => {
    for (const s of schedulers.splice(0)) await s.stop(0);
    for (const c of cleanups.splice(0)) await c();
  });
  const open = async (): Promise<Store> => {
    const { store, cleanup } = await makeStore();
    cleanups.push(cleanup);
    return store;
  };
  const scheduler = (store: Store, upstream: Upstream, results: Results, owner: string, clock: () => number, config = CONFIG, log = createLogger('silent')) => {
    const s = new Scheduler({ config, store, upstream, results, logger: log, owner, clock });
    schedulers.push(s);
    s.start();
    return s;
  };

  /** A job admitted, claimed by `dead` and its reply recorded; then `dead` is gone. */
  const recordedThenKilled = async (store: Store, o: Partial<Parameters<typeof makeJob>[0]> = {}): Promise<{ job: Job; reply: Reply }> => {
    const now = Date.now();
    const job = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'normal', arrivalMs: now, ...o });
    expect(await store.queue.admit(job, LIMITS, now)).toEqual({ kind: 'queued' });
    const [held] = (await store.queue.claim({ owner: 'dead', max: 1, leaseMs: LEASE_MS, rpm: 1000, tpm: undefined }, now)).jobs;
    const reply = makeReply(job, 'recorded before the kill');
    expect(await store.queue.recordReply(held as ClaimedJob, reply, 'dead')).toEqual({ kind: 'recorded' });
    return { job, reply };
  };

  it('publishes the reply a killed holder recorded, byte for byte, without calling the upstream', async () => {
    const store = await open();
    const { job, reply } = await recordedThenKilled(store);
    const later = () => Date.now() + LEASE_MS + 1; // the dead holder's lease has run out
    expect(await store.queue.reap(CONFIG.maxAttempts, later())).toEqual([]);
    const up = fakeUpstream();
    const broker = fakeBroker();
    const s = scheduler(store, up.upstream, broker.results, 'heir', later);
    await until(() => broker.sent.length === 1);
    expect(broker.sent[0]).toBe(JSON.stringify(reply));
    expect(up.calls).toEqual([]);
    await settled(s);
    expect(await store.answers.storedReply(job.key, later())).toEqual(reply);
    expect(await store.queue.admit(job, LIMITS, later())).toEqual({ kind: 'duplicate_done', reply });
  });

  it('requeues rather than dead-letters a recorded job out of attempts: the reaper publishes nothing of its own', async () => {
    const store = await open();
    const { job, reply } = await recordedThenKilled(store);
    const later = () => Date.now() + LEASE_MS + 1;
    const up = fakeUpstream();
    const broker = fakeBroker();
    // maxAttempts 1: without the recorded reply, the reap would give up on the job (upstream_error).
    const s = scheduler(store, up.upstream, broker.results, 'heir', later, { ...CONFIG, maxAttempts: 1 });
    await until(() => broker.sent.length === 1, 4000); // the first reap runs 2 s after start
    await settled(s);
    expect(broker.sent).toEqual([JSON.stringify(reply)]);
    expect(up.calls).toEqual([]);
    expect((await store.operations.deadLetters.page(10, undefined, Date.now())).entries).toEqual([]);
    expect(await store.answers.storedReply(job.key, later())).toEqual(reply);
  });

  it('answers a recorded job whose deadline passed in the queue with its reply, not `expired`', async () => {
    const store = await open();
    const now = Date.now();
    const { job, reply } = await recordedThenKilled(store, { deadlineMs: now + 100 });
    const later = () => Date.now() + LEASE_MS + 1;
    await store.queue.reap(CONFIG.maxAttempts, later());
    const broker = fakeBroker();
    const s = scheduler(store, fakeUpstream().upstream, broker.results, 'heir', later);
    await until(() => broker.sent.length === 1);
    await settled(s);
    expect(broker.sent).toEqual([JSON.stringify(reply)]);
    expect(await store.answers.storedReply(job.key, later())).toEqual(reply);
  });

  it('after a failed publish, the job is answered again with the same reply and no second upstream call', async () => {
    const store = await open();
    let offset = 0;
    const clock = () => Date.now() + offset;
    const up = fakeUpstream();
    const broker = fakeBroker(1);
    const s = scheduler(store, up.upstream, broker.results, 'me', clock);
    const job = makeJob({ deviceId: 'cam-1', id: 'r-2', priority: 'normal', arrivalMs: clock() });
    expect(await store.queue.admit(job, LIMITS, clock())).toEqual({ kind: 'queued' });
    s.wake();
    await until(() => up.calls.length === 1);
    await settled(s); // the publish failed: left to the lease
    expect(broker.sent).toEqual([]);
    offset = LEASE_MS + 1;
    await store.queue.reap(CONFIG.maxAttempts, clock());
    s.wake();
    await until(() => broker.sent.length === 1);
    await settled(s);
    expect(up.calls).toEqual(['r-2']);
    const reply = JSON.parse(broker.sent[0] as string) as Reply;
    expect(reply).toMatchObject({ id: 'r-2', ok: true, content: 'fresh answer 1', attempts: 1 });
    expect(await store.answers.storedReply(job.key, clock())).toEqual(reply);
  });

  it('publishes nothing when the lease was lost before the reply could be recorded', async () => {
    const store = await open();
    let offset = 0;
    const clock = () => Date.now() + offset;
    const up = fakeUpstream();
    let open_ = (): void => undefined;
    up.hold(new Promise<void>((resolve) => (open_ = resolve)));
    const broker = fakeBroker();
    const sink = logSink();
    // One slot: busy with the job, it claims nothing else meanwhile (nor the job once reaped).
    const s = scheduler(store, up.upstream, broker.results, 'slow', clock, { ...CONFIG, maxConcurrency: 1 }, createLogger('info', sink.stream));
    const job = makeJob({ deviceId: 'cam-1', id: 'r-3', priority: 'normal', arrivalMs: clock() });
    await store.queue.admit(job, LIMITS, clock());
    s.wake();
    await until(() => up.calls.length === 1);
    // The call outlives the lease (a stalled process): reaped and taken by another instance.
    offset = LEASE_MS + 1;
    await store.queue.reap(CONFIG.maxAttempts, clock());
    const taken = await store.queue.claim({ owner: 'other', max: 1, leaseMs: LEASE_MS, rpm: 1000, tpm: undefined }, clock());
    expect(taken.jobs.map((j) => j.id)).toEqual(['r-3']);
    open_();
    await until(() => sink.text().includes('lease lost before the reply could be recorded'));
    await settled(s);
    expect(broker.sent).toEqual([]);
    // The holder records its own reply; the stalled one recorded none.
    const theirs = makeReply(job, 'the holder answers');
    expect(await store.queue.recordReply(taken.jobs[0] as ClaimedJob, theirs, 'other')).toEqual({ kind: 'recorded' });
  });
});

describe('which endings are dead-lettered', () => {
  const ending = (code: ErrorCode): Reply => ({ id: 'r', ok: false, error: { code, message: 'x' } });
  it('keeps what a replay could answer, never a refusal the request caused or one about its device', () => {
    for (const code of ['upstream_error', 'upstream_timeout', 'invalid_output', 'unavailable', 'internal'] as const)
      expect(deadLettered(ending(code))).toBe(true);
    for (const code of ['invalid_request', 'payload_too_large', 'rate_limited', 'queue_full', 'budget_exceeded', 'expired'] as const) {
      expect(deadLettered(ending(code))).toBe(false);
    }
    expect(ERROR_CODES.length).toBe(11); // a new code: decide here whether a replay could answer it
    expect(deadLettered({ id: 'r', ok: true, content: 'fine', model: 'm' } as Reply)).toBe(false);
  });
});
