// Coalescing: identical requests (same cache key) share one upstream call. The first leads
// the flight and calls; the others follow, waiting for its answer in the cache, and lead in
// turn if it fails.
import { setTimeout as sleep } from 'node:timers/promises';
import { BridgeError, LeaseLost } from '../../contract/index.js';
import type { CachedAnswer, FlightClaim, Lead, Store } from '../store/port.js';
import type { ClaimedJob, Job } from '../model/job.js';

/** How often a request waiting on an identical one in flight looks for its answer. */
const FOLLOW_POLL_MS = 25;

/** A claimed job whose first coalescing step came with the admission that queued it. */
export interface KnownLead {
  key: string;
  lead: Lead;
}

/** What following needs of a running job: its key, its abort, and whether its lease was lost. */
export interface Follower {
  readonly job: Pick<Job, 'key'>;
  readonly abort: AbortController;
  readonly leaseLost: boolean;
}

export class Coalescer {
  constructor(
    private readonly store: Pick<Store, 'answers'>,
    private readonly leaseMs: number,
    private readonly clock: () => number,
  ) {}

  /**
   * The first coalescing step of every claimed job that may share its call, as one store
   * call for the whole claim rather than one per job (the known one as it is). Undefined for
   * a job that never shares.
   */
  leadAll(jobs: ClaimedJob[], now: number, known?: KnownLead): (Lead | Promise<Lead> | undefined)[] {
    const flights: FlightClaim[] = [];
    for (const job of jobs) {
      if (shares(job) && job.key !== known?.key) flights.push({ cacheKey: job.cacheKey as string, jobKey: job.key });
    }
    const batch = flights.length === 0 ? undefined : this.store.answers.lead(flights, this.leaseMs, now);
    let index = 0;
    return jobs.map((job) => {
      if (!shares(job)) return undefined;
      if (known && job.key === known.key) return known.lead;
      const mine = index++;
      return batch?.then((leads) => nth(leads, mine));
    });
  }

  /**
   * The first of identical requests calls the upstream (undefined: this job leads); the
   * others wait for its answer in the cache (holding their leases) and lead in turn if it fails.
   */
  async followOrLead(follower: Follower, cacheKey: string, firstLead: Lead | Promise<Lead>): Promise<CachedAnswer | undefined> {
    const { job } = follower;
    let lead = await firstLead;
    for (;;) {
      if ('answer' in lead) return lead.answer;
      if (lead.leader === job.key) return undefined;
      await sleep(FOLLOW_POLL_MS, undefined, { signal: follower.abort.signal });
      if (follower.leaseLost) throw new LeaseLost();
      lead = nth(await this.store.answers.lead([{ cacheKey, jobKey: job.key }], this.leaseMs, this.clock()), 0);
    }
  }
}

/** A job with a recorded reply makes no call: it takes no flight. */
function shares(job: ClaimedJob): boolean {
  return job.cacheKey !== undefined && job.recordedReply === undefined;
}

function nth(leads: Lead[], index: number): Lead {
  const lead = leads[index];
  if (!lead) throw new BridgeError('internal', 'the store answered fewer coalescing steps than it was asked');
  return lead;
}
