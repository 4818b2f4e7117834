// The plant's broker (BROKER_URL) with Redis: each instance's broker sessions under a liveness
// lease, so that when an instance dies and stays away another one adopts its sessions and
// answers what the broker queued there (recovery/adoption.ts). Redis only: on the memory store
// there is one process, and nobody left to adopt anything.
//
// A start of an instance registers a new generation of its record; its lease is renewed while it
// runs and removed when it stops cleanly. An adopter claims a lapsed record's generation in one
// atomic step, so two instances never adopt the same death; the claim is itself a lease the
// adopter renews, and a new start of the dead instance (a new generation), or its own renewal
// (it was only paused), ends the claim.

/** What an instance left on the plant's broker: who to connect as, and how long the broker keeps it. */
export interface SessionRecord {
  instanceId: string;
  /** Rises with every start of any instance: a claim names the start it adopts. */
  generation: number;
  /** BROKER_SHARE_GROUP: only the instances of one group adopt each other. */
  group: string;
  /** The client ids of its connections (INSTANCE_ID, INSTANCE_ID-1, …). */
  clientIds: string[];
  /** BROKER_SESSION_EXPIRY_S it connected with. */
  sessionExpiryS: number;
}

/** An adoption claim: the record's generation and the adopter's fenced token. */
export interface AdoptionClaim {
  instanceId: string;
  generation: number;
  /** `{adopter}|{fencing number}`: a later claim on the same record never holds the same token. */
  token: string;
}

/** What a renewal of an instance's own lease found. */
export type Renewal = 'held' | 'gone' | 'replaced';

export interface SessionRegistry {
  /** Registers a start of the instance (a new generation) with a lease of `ttlMs`; returns the generation. */
  join(record: Omit<SessionRecord, 'generation'>, ttlMs: number): Promise<number>;
  /**
   * Renews the lease of this start: `gone` when its record was adopted and removed (the
   * instance was taken for dead), `replaced` when another start of its id registered since.
   */
  renew(instanceId: string, generation: number, ttlMs: number): Promise<Renewal>;
  /** Removes the record (a clean stop), only this start's or, without a generation, any. */
  leave(instanceId: string, generation?: number): Promise<void>;
  /** Records whose lease lapsed and that no adopter holds, oldest generation first. */
  lapsed(): Promise<SessionRecord[]>;
  /** Claims a lapsed record for `adopter` for `ttlMs`; undefined when it is alive again, replaced or claimed. */
  claim(record: SessionRecord, adopter: string, ttlMs: number): Promise<AdoptionClaim | undefined>;
  /** Renews the claim; false once it is lost (the instance is back, renewed, or the claim ran out). */
  hold(claim: AdoptionClaim, ttlMs: number): Promise<boolean>;
  /**
   * Ends the claim. `adopted`: every session was drained and ended, so the record goes;
   * otherwise it stays for another adoption.
   */
  release(claim: AdoptionClaim, adopted: boolean): Promise<void>;
}
