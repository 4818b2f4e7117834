// The "claim along" handshake between admission and the scheduler: an admission carries a
// claim for this instance's free slots, so a request arriving at an idle instance is claimed
// in the same store call that queues it.
import type { ClaimAlong, ClaimOptions } from '../store/port.js';

/** How admission hands work to the scheduler (Scheduler implements it). */
export interface Dispatch {
  /** Claim options to carry, reserving free slots until adopt(); undefined when none are free. */
  claimAlong(): ClaimOptions | undefined;
  /** The admission ended; `along` is what its claim brought, if it queued anything. */
  adopt(claim: ClaimOptions, along: ClaimAlong | undefined, jobKey: string): void;
  /** A request was queued without a claim: the scheduler may claim it. */
  wake(): void;
  /** A request was queued with a deadline (ttl_ms, MQTT 5 expiry): still waiting then, it is answered `expired` then. */
  watchDeadline(jobKey: string, deadlineMs: number): void;
}
