// Where a provider's circuit lives: in this process (breaker-memory.ts) for one instance, or in
// Redis (store/breaker-state.ts) for a fleet, chosen by the composition root.
import type { Acquired, BreakerConfig, Recorded } from '../model/circuit.js';

/** Where circuits live. Every call takes `now` from the caller, so all instances agree on time. */
export interface BreakerStore {
  /** The state lives outside this process, shared by every instance: each call is a round trip. */
  readonly shared: boolean;
  acquire(name: string, config: BreakerConfig, now: number): Promise<Acquired>;
  /**
   * `successes`: earlier successes of calls that held no probe, applied before this outcome
   * (only while closed, as each on its own would be), so a batch keeps the order of outcomes.
   */
  record(name: string, config: BreakerConfig, ok: boolean, probe: string | undefined, now: number, successes?: number): Promise<Recorded>;
  /** Gives a probe back unused (the call stopped before its attempt ran). */
  release(name: string, config: BreakerConfig, probe: string, now: number): Promise<void>;
}
