// Store contract, the queue: claim order by score (aging), expiry of queued jobs, drain and
// queue depth, concurrent claimers each getting distinct jobs, and the stored size
// QUEUE_MAX_BYTES counts.
import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { PRIORITIES, type Priority } from '../../../contract/index.js';
import { DEFAULT_PRIORITY_OFFSETS_MS } from '../../../bridge/config/config.js';
import { storedSize } from '../../../bridge/store/job-size.js';
import type { ClaimedJob, Job } from '../../../bridge/model/job.js';
import {
  admitAll,
  allDeadLetters,
  baseTime,
  claimOpts,
  type ContractContext,
  DONE,
  errorReply,
  ids,
  leaves,
  LIMITS,
  makeJob,
  type MakeJobOptions,
  sameJob,
} from './fixtures.js';

export function claimOrderContract({ open }: ContractContext): void {
  describe('claim order', () => {
    it('claims the smallest score first', async () => {
      const store = await open();
      const t = baseTime();
      await admitAll(
        store,
        [
          makeJob({ deviceId: 'd1', id: 'n', priority: 'normal', arrivalMs: t }), // t+5000
          makeJob({ deviceId: 'd2', id: 'h', priority: 'high', arrivalMs: t + 1 }), // t+2001
          makeJob({ deviceId: 'd3', id: 'l', priority: 'low', arrivalMs: t + 2 }), // t+15002
          makeJob({ deviceId: 'd4', id: 'c', priority: 'critical', arrivalMs: t + 3 }), // t+3
        ],
        t + 3,
      );
      const order: string[] = [];
      for (let i = 0; i < 4; i += 1) order.push(...ids((await store.queue.claim(claimOpts({ max: 1 }), t + 10 + i)).jobs));
      expect(order).toEqual(['c', 'h', 'n', 'l']);
    });

    it('claims equal scores in admission order', async () => {
      const store = await open();
      const t = baseTime();
      // Neither key order nor id order matches admission order.
      const jobs = [
        makeJob({ deviceId: 'm', id: 'z', priority: 'normal', arrivalMs: t }),
        makeJob({ deviceId: 'z', id: 'a', priority: 'normal', arrivalMs: t }),
        makeJob({ deviceId: 'a', id: 'm', priority: 'normal', arrivalMs: t }),
        makeJob({ deviceId: 'b', id: 'b', priority: 'high', arrivalMs: t + 3000 }), // same score t+5000
      ];
      await admitAll(store, jobs, t);
      const first = await store.queue.claim(claimOpts({ max: 2 }), t + 1);
      const rest = await store.queue.claim(claimOpts({ max: 10 }), t + 2);
      expect([...ids(first.jobs), ...ids(rest.jobs)]).toEqual(['z', 'a', 'm', 'b']);
    });

    it('ages a low job ahead of a critical one that arrived more than 15 s later, not of one that arrived earlier', async () => {
      const store = await open();
      const t = baseTime();
      const low = makeJob({ deviceId: 'd-low', id: 'low', priority: 'low', arrivalMs: t }); // t+15000
      const critEarlier = makeJob({ deviceId: 'd-c1', id: 'crit-earlier', priority: 'critical', arrivalMs: t - 1 });
      const critWithin = makeJob({ deviceId: 'd-c2', id: 'crit-14999', priority: 'critical', arrivalMs: t + 14_999 });
      const critLater = makeJob({ deviceId: 'd-c3', id: 'crit-15001', priority: 'critical', arrivalMs: t + 15_001 });
      const highLater = makeJob({ deviceId: 'd-h', id: 'high-13001', priority: 'high', arrivalMs: t + 13_001 }); // t+15001
      // All admitted at once, latest first, so only the score can explain the order.
      for (const job of [critLater, highLater, critWithin, low, critEarlier]) {
        expect(await store.queue.admit(job, LIMITS, t + 15_001)).toEqual({ kind: 'queued' });
      }
      const order: string[] = [];
      for (let i = 0; i < 5; i += 1) order.push(...ids((await store.queue.claim(claimOpts({ max: 1 }), t + 20_000 + i)).jobs));
      expect(order).toEqual(['crit-earlier', 'crit-14999', 'low', 'crit-15001', 'high-13001']);
    });

    it("honours the score it is given (offsets are the caller's)", async () => {
      const store = await open();
      const t = baseTime();
      const low = makeJob({ deviceId: 'd1', id: 'low', priority: 'low', arrivalMs: t, offsetMs: 100 });
      const crit = makeJob({ deviceId: 'd2', id: 'crit', priority: 'critical', arrivalMs: t + 101, offsetMs: 0 });
      await admitAll(store, [crit, low], t + 101);
      expect(ids((await store.queue.claim(claimOpts(), t + 200)).jobs)).toEqual(['low', 'crit']);
    });

    it('returns at most max jobs per claim, and many at once when they are ready', async () => {
      const store = await open();
      const t = baseTime();
      const jobs = Array.from({ length: 7 }, (_, i) => makeJob({ deviceId: `d${i}`, id: `r${i}`, priority: 'normal', arrivalMs: t + i }));
      await admitAll(store, jobs);
      const first = await store.queue.claim(claimOpts({ max: 2 }), t + 10);
      expect(ids(first.jobs)).toEqual(['r0', 'r1']);
      const second = await store.queue.claim(claimOpts({ max: 100 }), t + 11);
      expect(ids(second.jobs)).toEqual(['r2', 'r3', 'r4', 'r5', 'r6']);
      const third = await store.queue.claim(claimOpts({ max: 100 }), t + 12);
      expect(third).toEqual({ jobs: [], expired: [], retryAtMs: undefined });
    });

    it('hands out the job as admitted, leased to the claiming owner', async () => {
      const store = await open();
      const t = baseTime();
      const job = makeJob({ deviceId: 'cam-1', id: 'r-1', priority: 'high', arrivalMs: t, deadlineMs: t + 9000, tokenEstimate: 77 });
      const locked = makeJob({ deviceId: 'cam-1', id: 'r-2', priority: 'high', arrivalMs: t + 1, lock: 'line-3/arm' });
      await admitAll(store, [job, locked]);
      const { jobs } = await store.queue.claim(claimOpts({ owner: 'instance-a:1' }), t + 2);
      expect(jobs).toHaveLength(2);
      sameJob(jobs[0] as Job, job);
      sameJob(jobs[1] as Job, locked);
      expect(jobs[0]?.owner).toBe('instance-a:1');
      expect(jobs[0]?.fence).toBeUndefined();
      expect(jobs[1]?.owner).toBe('instance-a:1');
      expect(jobs[1]?.fence).toBe(1); // the lock's first grant
      expect(jobs[0]?.callId).not.toBe(jobs[1]?.callId);
    });

    it('settles a call with the tokens the upstream reported, freeing or using tpm budget', async () => {
      const store = await open();
      const t = baseTime();
      const big = makeJob({ deviceId: 'd1', id: 'big', priority: 'high', arrivalMs: t, tokenEstimate: 900 });
      const next = makeJob({ deviceId: 'd1', id: 'next', priority: 'high', arrivalMs: t + 1, tokenEstimate: 500 });
      await admitAll(store, [big, next]);
      const first = await store.queue.claim(claimOpts({ tpm: 1000 }), t + 2);
      expect(ids(first.jobs)).toEqual(['big']); // 900 + 500 > 1000
      // The upstream used far less than estimated: the rest of the budget opens up.
      await store.limits.settleTokens((first.jobs[0] as ClaimedJob).callId, 100);
      expect(ids((await store.queue.claim(claimOpts({ tpm: 1000 }), t + 3)).jobs)).toEqual(['next']);
      // And a call that used more than estimated takes more budget.
      const take = await store.limits.takeRate(10, 100, 1000, t + 4);
      if (!take.ok) throw new Error('expected budget');
      await store.limits.settleTokens(take.callId, 450);
      expect((await store.limits.takeRate(10, 100, 1000, t + 5)).ok).toBe(false); // 100 + 500 + 450 + 10 > 1000
      // Settling a call that left the window changes nothing: the budget counts only the
      // calls still in it (here one of 900 tokens, taken after the others left).
      const later = leaves(t + 4);
      expect((await store.limits.takeRate(900, 100, 1000, later)).ok).toBe(true);
      await store.limits.settleTokens(take.callId, 0);
      expect((await store.limits.takeRate(200, 100, 1000, later + 1)).ok).toBe(false); // 900 + 200 > 1000
    });
  });
}

export function expiryContract({ open }: ContractContext): void {
  describe('expiry', () => {
    it('returns a queued job whose deadline has come in expired, not in jobs, and drops it from the queue', async () => {
      const store = await open();
      const t = baseTime();
      const dead = makeJob({ deviceId: 'd1', id: 'dead', priority: 'critical', arrivalMs: t, deadlineMs: t + 1000 });
      const alive = makeJob({ deviceId: 'd2', id: 'alive', priority: 'critical', arrivalMs: t + 1, deadlineMs: t + 1001 });
      const plain = makeJob({ deviceId: 'd3', id: 'plain', priority: 'normal', arrivalMs: t + 2 });
      await admitAll(store, [dead, alive, plain]);
      // rpm 2: the expired job takes no rate token.
      const result = await store.queue.claim(claimOpts({ rpm: 2 }), t + 1000);
      expect(ids(result.expired)).toEqual(['dead']);
      sameJob(result.expired[0] as Job, dead);
      expect(ids(result.jobs)).toEqual(['alive', 'plain']);
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
      expect(await store.queue.claim(claimOpts(), t + 1001)).toEqual({ jobs: [], expired: [], retryAtMs: undefined });
      expect(await store.queue.admit(dead, LIMITS, t + 1002)).toEqual({ kind: 'duplicate_pending' });
    });

    it('takes out every waiting job whose deadline passed, behind others or a lock, in a claim of none while paused', async () => {
      const store = await open();
      const t = baseTime();
      const holder = makeJob({ deviceId: 'd1', id: 'holder', priority: 'critical', arrivalMs: t, lock: 'line' });
      await admitAll(store, [holder]);
      expect(ids((await store.queue.claim(claimOpts({ max: 1 }), t + 1)).jobs)).toEqual(['holder']);
      const parked = makeJob({ deviceId: 'd2', id: 'parked', priority: 'critical', arrivalMs: t + 2, lock: 'line', deadlineMs: t + 500 });
      const head = makeJob({ deviceId: 'd3', id: 'head', priority: 'high', arrivalMs: t + 3 });
      const front = makeJob({ deviceId: 'd4', id: 'front', priority: 'normal', arrivalMs: t + 4 });
      const behind = makeJob({ deviceId: 'd5', id: 'behind', priority: 'low', arrivalMs: t + 5, deadlineMs: t + 500 });
      await admitAll(store, [parked, head, front, behind]);
      expect(ids((await store.queue.claim(claimOpts({ max: 1 }), t + 10)).jobs)).toEqual(['head']); // parked behind the lock
      await store.limits.pauseUpstream(t + 10_000);
      const swept = await store.queue.claim(claimOpts({ max: 0 }), t + 500);
      expect(ids(swept.expired).sort()).toEqual(['behind', 'parked']);
      expect(swept.jobs).toEqual([]);
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 1, low: 0 });
    });

    it('stores the reply of a completed expired job for its duplicates', async () => {
      const store = await open();
      const t = baseTime();
      const job = makeJob({ deviceId: 'd1', id: 'r-1', priority: 'low', arrivalMs: t, deadlineMs: t + 500 });
      await admitAll(store, [job]);
      const { expired } = await store.queue.claim(claimOpts(), t + 600);
      expect(ids(expired)).toEqual(['r-1']);
      const reply = errorReply(job, 'expired');
      await store.queue.complete(expired[0] as Job, reply, DONE, t + 601);
      expect(await store.queue.admit(job, LIMITS, t + 700)).toEqual({ kind: 'duplicate_done', reply });
      expect(await store.answers.storedReply(job.key, t + 700)).toEqual(reply);
      expect(await allDeadLetters(store)).toEqual([]);
    });
  });
}

export function drainContract({ open, durable }: ContractContext): void {
  describe('drain, queue depth and durability', () => {
    it('counts queue depth per priority, queued and parked, not claimed', async () => {
      const store = await open();
      const t = baseTime();
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
      const spec: [Priority, number][] = [
        ['critical', 1],
        ['high', 2],
        ['low', 3],
      ];
      let n = 0;
      for (const [priority, count] of spec) {
        for (let i = 0; i < count; i += 1) {
          await admitAll(store, [makeJob({ deviceId: `d${n}`, id: `r${n}`, priority, arrivalMs: t + n })]);
          n += 1;
        }
      }
      expect(await store.operations.queueDepth()).toEqual({ critical: 1, high: 2, normal: 0, low: 3 });
      const a = makeJob({ deviceId: 'dx', id: 'a', priority: 'normal', arrivalMs: t - 10_000, lock: 'x' });
      const b = makeJob({ deviceId: 'dy', id: 'b', priority: 'normal', arrivalMs: t - 9_000, lock: 'x' });
      await admitAll(store, [a, b], t + 100);
      expect(ids((await store.queue.claim(claimOpts({ max: 1 }), t + 101)).jobs)).toEqual(['a']);
      // b (queued or parked) counts; a, claimed, does not.
      expect(await store.operations.queueDepth()).toEqual({ critical: 1, high: 2, normal: 1, low: 3 });
    });

    it('drains every queued and parked job and leaves the queue empty', async () => {
      const store = await open();
      const t = baseTime();
      const a = makeJob({ deviceId: 'd1', id: 'a', priority: 'normal', arrivalMs: t, lock: 'x' });
      const b = makeJob({ deviceId: 'd2', id: 'b', priority: 'high', arrivalMs: t + 1, lock: 'x' });
      const c = makeJob({ deviceId: 'd3', id: 'c', priority: 'low', arrivalMs: t + 2 });
      const d = makeJob({ deviceId: 'd4', id: 'd', priority: 'critical', arrivalMs: t + 3 });
      await admitAll(store, [a, b]);
      expect(ids((await store.queue.claim(claimOpts({ max: 1 }), t + 2)).jobs)).toEqual(['b']);
      expect((await store.queue.claim(claimOpts({ max: 5 }), t + 2)).jobs).toEqual([]); // a parked behind b
      await admitAll(store, [c, d]);

      const drained = await store.queue.drain();
      expect(ids(drained).sort()).toEqual(['a', 'c', 'd']);
      for (const job of drained) sameJob(job, ({ a, c, d } as Record<string, Job>)[job.id] as Job);
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
      expect(await store.queue.drain()).toEqual([]);
      expect(await store.queue.claim(claimOpts(), t + 4)).toEqual({ jobs: [], expired: [], retryAtMs: undefined });
    });

    it('reports whether it is durable', async () => {
      const store = await open();
      expect(store.durable).toBe(durable);
    });
  });
}

export function concurrencyContract({ open }: ContractContext): void {
  describe('concurrency', () => {
    it('hands each of 2000 jobs to exactly one of 8 concurrent claimers', async () => {
      const store = await open();
      const t = baseTime();
      const total = 2000;
      const jobs = Array.from({ length: total }, (_, i) =>
        makeJob({ deviceId: `dev-${i % 50}`, id: `j-${i}`, priority: PRIORITIES[i % 4] as Priority, arrivalMs: t + i }),
      );
      const limits = { deviceRpm: total, queueMax: total };
      await Promise.all(jobs.map((job) => store.queue.admit(job, limits, t + total)));
      const claimedBy = new Map<string, string[]>();
      const claimer = async (owner: string): Promise<void> => {
        for (;;) {
          const { jobs: got } = await store.queue.claim(claimOpts({ owner, max: 7 }), t + total);
          if (got.length === 0) return;
          for (const job of got) claimedBy.set(job.key, [...(claimedBy.get(job.key) ?? []), owner]);
        }
      };
      await Promise.all(Array.from({ length: 8 }, (_, i) => claimer(`worker-${i}`)));
      expect(claimedBy.size).toBe(total);
      expect([...claimedBy.values()].filter((owners) => owners.length !== 1)).toEqual([]);
      expect(new Set([...claimedBy.values()].map((o) => o[0])).size).toBeGreaterThan(1);
      expect(await store.operations.queueDepth()).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
    });
  });
}

export function queueBytesContract({ open }: ContractContext): void {
  describe('queueMaxBytes', () => {
    const image = (seed: string): NonNullable<Job['image']> => {
      const base64 = Buffer.alloc(3000, seed).toString('base64');
      return { mime: 'image/jpeg', sha256: createHash('sha256').update(base64).digest('hex'), bytes: 3000, base64 };
    };
    const imaged = (id: string, t: number, seed = id, o: Partial<MakeJobOptions> = {}): Job => ({
      ...makeJob({ deviceId: 'cam-1', id, priority: 'normal', arrivalMs: t, ...o }),
      image: image(seed),
    });

    it("counts each job's stored size from admission to its answer, and answers queue_full over the limit", async () => {
      const store = await open();
      const t = baseTime();
      const a = imaged('a', t);
      const b = imaged('b', t + 1);
      const limits = { ...LIMITS, queueMaxBytes: storedSize(a) + storedSize(b) - 1 };
      expect(await store.queue.admit(a, limits, t)).toEqual({ kind: 'queued' });
      expect(await store.operations.queueBytes()).toBe(storedSize(a));
      expect(await store.queue.admit(b, limits, t + 1)).toEqual({ kind: 'queue_full' });
      const held = (await store.queue.claim(claimOpts(), t + 2)).jobs[0] as ClaimedJob;
      sameJob(held, a); // the image's bytes come back with the claim
      expect(await store.operations.queueBytes()).toBe(storedSize(a)); // held, not yet answered
      expect(await store.queue.admit(b, limits, t + 3)).toEqual({ kind: 'queue_full' });
      await store.queue.complete(held, errorReply(held, 'upstream_error'), DONE, t + 4);
      expect(await store.operations.queueBytes()).toBe(0);
      expect(await store.queue.admit(b, limits, t + 5)).toEqual({ kind: 'queued' });
      // Claimed along an admission, the image's bytes come back too.
      const c = imaged('c', t + 6, 'b');
      const along = await store.queue.admit(c, LIMITS, t + 6, claimOpts({ max: 2 }));
      if (along.kind !== 'queued' || !along.along) throw new Error('expected queued with a claim');
      expect(along.along.claim.jobs.map((j) => j.image?.base64)).toEqual([b.image?.base64, c.image?.base64]);
    });

    it('stays exact through claim, release, expiry, reap, complete, dead letters, replay and drain', async () => {
      const store = await open();
      const t = baseTime();
      const [j1, j2, j3, j4] = [imaged('j1', t), imaged('j2', t + 1, 'j2', { deadlineMs: t + 50 }), imaged('j3', t + 2), imaged('j4', t + 3)] as [
        Job,
        Job,
        Job,
        Job,
      ];
      await admitAll(store, [j1, j2, j3, j4]);
      const all = storedSize(j1) + storedSize(j2) + storedSize(j3) + storedSize(j4);
      expect(await store.operations.queueBytes()).toBe(all);
      const first = (await store.queue.claim(claimOpts({ max: 1, leaseMs: 1000 }), t + 10)).jobs;
      expect(ids(first)).toEqual(['j1']);
      await store.queue.release(first as ClaimedJob[], t + 11);
      expect(await store.operations.queueBytes()).toBe(all);
      // j2's deadline passed: handed out for its last reply, it no longer counts.
      const second = await store.queue.claim(claimOpts({ max: 1, leaseMs: 1000 }), t + 100);
      expect(ids(second.expired)).toEqual(['j2']);
      expect(ids(second.jobs)).toEqual(['j1']);
      expect(await store.operations.queueBytes()).toBe(all - storedSize(j2));
      await store.queue.complete(second.expired[0] as Job, errorReply(j2, 'expired'), DONE, t + 101);
      expect(await store.operations.queueBytes()).toBe(all - storedSize(j2));
      // j1's lease ran out on its last attempt: handed out too.
      expect(ids(await store.queue.reap(1, t + 2000))).toEqual(['j1']);
      expect(await store.operations.queueBytes()).toBe(storedSize(j3) + storedSize(j4));
      await store.queue.complete(second.jobs[0] as ClaimedJob, errorReply(j1, 'upstream_error'), DONE, t + 2001);
      // j3 answered as a dead letter, then replayed: the operator's replay is not counted, before or after.
      const third = (await store.queue.claim(claimOpts({ max: 1 }), t + 2002)).jobs[0] as ClaimedJob;
      await store.queue.complete(third, errorReply(third, 'upstream_error'), { ...DONE, deadLetter: true }, t + 2003);
      expect(await store.operations.queueBytes()).toBe(storedSize(j4));
      expect(await store.operations.deadLetters.replayAll(DEFAULT_PRIORITY_OFFSETS_MS, t + 2004)).toBe(1);
      expect(await store.operations.queueBytes()).toBe(storedSize(j4));
      const last = (await store.queue.claim(claimOpts({ max: 2 }), t + 2005)).jobs;
      expect(ids(last)).toEqual(['j4', 'j3']);
      await store.queue.complete(last[1] as ClaimedJob, errorReply(j3, 'upstream_error'), DONE, t + 2006);
      await store.queue.release([last[0] as ClaimedJob], t + 2007);
      expect(await store.operations.queueBytes()).toBe(storedSize(j4));
      expect(ids(await store.queue.drain())).toEqual(['j4']);
      expect(await store.operations.queueBytes()).toBe(0);
    });
  });
}
