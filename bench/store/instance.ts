// One instance's share of a store scenario: admit its jobs, claim whatever the shared queue
// holds and complete it, until every instance has admitted everything and the queue is empty.
import type { ClaimedJob, ExpiredJob } from '../../bridge/model/job.js';
import type { ClaimOptions, Store } from '../../bridge/store/port.js';
import { DONE, LEASE_MS, LIMITS, RATE, type Sizes } from './options.js';
import { jobFor, replyFor, requestBookkeeping } from './workload.js';

/**
 * serial: every call awaited in turn (batching off); batched: many calls in flight at once;
 * request: batched, each job taking a request's whole store path as the bridge does (cache
 * key, coalescing step, recorded reply, completion with cache entry, end of flight and usage).
 */
export type Mode = 'serial' | 'batched' | 'request';

export interface Share {
  /** Indices of the jobs this instance admits: first, first + step, ... below total. */
  first: number;
  step: number;
  total: number;
}

export interface Coordinator {
  /** Read BEFORE a claim: if true and the claim comes back empty, the shared queue is empty. */
  allAdmitted(): boolean;
  admitsDone(): void;
}

export interface InstanceResult {
  admitted: number;
  completed: number;
  claims: number;
  emptyClaims: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

class Instance {
  readonly result: InstanceResult = { admitted: 0, completed: 0, claims: 0, emptyClaims: 0 };
  private readonly claimOptions: ClaimOptions;

  constructor(
    private readonly store: Store,
    owner: string,
    private readonly mode: Mode,
    private readonly share: Share,
    private readonly co: Coordinator,
    private readonly sizes: Sizes,
  ) {
    const max = mode === 'serial' ? 1 : sizes.claimMax;
    this.claimOptions = { owner, max, leaseMs: LEASE_MS, rpm: RATE.rpm, tpm: RATE.tpm };
  }

  private async admitOne(i: number): Promise<void> {
    const now = Date.now();
    const job = jobFor(i, this.sizes.devices, now);
    if (this.mode === 'request') job.cacheKey = `bench-${this.share.first}-${i}`;
    const result = await this.store.queue.admit(job, LIMITS, now);
    if (result.kind !== 'queued') throw new Error(`admit of job ${i} answered ${result.kind}`);
    this.result.admitted += 1;
  }

  /** One claim and the completion of all it brought; false when it came back empty. */
  private async claimAndComplete(): Promise<boolean> {
    const { jobs, expired } = await this.store.queue.claim(this.claimOptions, Date.now());
    this.result.claims += 1;
    const finished = [...jobs, ...expired];
    if (finished.length === 0) {
      this.result.emptyClaims += 1;
      return false;
    }
    const complete = (job: (typeof finished)[number]) => this.store.queue.complete(job, replyFor(job, Date.now()), DONE, Date.now());
    if (this.mode === 'request') {
      await this.requestPath(jobs, expired);
    } else if (this.mode === 'serial') {
      for (const job of finished) await complete(job);
    } else {
      await Promise.all(finished.map(complete));
    }
    this.result.completed += finished.length;
    return true;
  }

  /** What the bridge asks of the store for claimed jobs: one coalescing step for the claim, then per job record and complete. */
  private async requestPath(jobs: ClaimedJob[], expired: ExpiredJob[]): Promise<void> {
    const flights = jobs.flatMap((job) => (job.cacheKey === undefined ? [] : [{ cacheKey: job.cacheKey, jobKey: job.key }]));
    if (flights.length > 0) await this.store.answers.lead(flights, LEASE_MS, Date.now());
    const finish = async (job: ClaimedJob): Promise<void> => {
      const reply = replyFor(job, Date.now());
      await this.store.queue.recordReply(job, reply, job.owner);
      await this.store.queue.complete(job, reply, { ...DONE, ...requestBookkeeping(job) }, Date.now());
    };
    await Promise.all([...jobs.map(finish), ...expired.map((job) => this.store.queue.complete(job, replyFor(job, Date.now()), DONE, Date.now()))]);
  }

  /** Claims until every instance has admitted everything and the queue is empty. */
  private async consume(): Promise<void> {
    for (;;) {
      const admittedBefore = this.co.allAdmitted();
      if (!(await this.claimAndComplete())) {
        if (admittedBefore) return;
        await sleep(1);
      }
    }
  }

  /** Batching off: admit one, claim one, complete it; every call awaited in turn. */
  async runSerial(): Promise<void> {
    for (let i = this.share.first; i < this.share.total; i += this.share.step) {
      await this.admitOne(i);
      await this.claimAndComplete();
    }
    this.co.admitsDone();
    await this.consume();
  }

  /** Batching on: `inflight` admits in flight, and enough claimers that `claimMax` jobs each
   * make about `inflight` completes in flight, all at once on the same connection. */
  async runBatched(): Promise<void> {
    const { inflight, claimMax } = this.sizes;
    let next = this.share.first;
    const admitter = async (): Promise<void> => {
      while (next < this.share.total) {
        const i = next;
        next += this.share.step;
        await this.admitOne(i);
      }
    };
    const producer = Promise.all(Array.from({ length: inflight }, admitter)).then(() => this.co.admitsDone());
    const claimers = Math.max(1, Math.round(inflight / claimMax));
    await Promise.all([producer, ...Array.from({ length: claimers }, () => this.consume())]);
  }
}

export async function runInstance(store: Store, owner: string, mode: Mode, share: Share, co: Coordinator, sizes: Sizes): Promise<InstanceResult> {
  const instance = new Instance(store, owner, mode, share, co, sizes);
  await (mode === 'serial' ? instance.runSerial() : instance.runBatched());
  return instance.result;
}
