// The Store contract: one suite every coordination implementation (memory, Redis) must pass,
// so they cannot drift. Each concern's cases live in ./contract/; this entry registers them all.
//
// Rules the cases keep, so the same suite runs against a shared Redis:
// - every case opens its own store through `open` (a Redis run gives each one its own key
//   prefix), and `cleanup` (default: `store.close()`) runs after the case;
// - time is an argument: every call passes an explicit `now`, relative to a base taken near
//   the real clock (so a backstop TTL on a Redis key is never already in the past); no timers.
import { afterEach, describe } from 'vitest';
import type { Store } from '../../bridge/store/port.js';
import { admissionContract, claimAlongContract, deviceQuotaContract, queueMaxContract } from './contract/admission.js';
import { cacheContract } from './contract/cache.js';
import { budgetsContract } from './contract/budgets.js';
import { completionContract } from './contract/completion.js';
import { fairnessContract } from './contract/fairness.js';
import { deadLettersContract } from './contract/dead-letters.js';
import type { ContractContext, StoreOptions } from './contract/fixtures.js';
import { leasesContract } from './contract/leases.js';
import { locksContract } from './contract/locks.js';
import { claimOrderContract, concurrencyContract, drainContract, expiryContract, queueBytesContract } from './contract/queue.js';
import { rateLimitsContract } from './contract/rate-limits.js';
import { recordedRepliesContract } from './contract/recorded-replies.js';

export { makeJob, makeReply, type MakeJobOptions } from './contract/fixtures.js';

/** The implementation under test. */
export interface StoreUnderTest {
  /** What every store it opens must report as `durable`. */
  durable: boolean;
  /** Opens a fresh, empty store. */
  open(options?: StoreOptions): Promise<Store>;
  /** Runs after each case; default: `store.close()`. */
  cleanup?(store: Store): Promise<void>;
}

const PARTS: ((ctx: ContractContext) => void)[] = [
  admissionContract,
  deviceQuotaContract,
  queueMaxContract,
  claimAlongContract,
  claimOrderContract,
  fairnessContract,
  budgetsContract,
  locksContract,
  rateLimitsContract,
  expiryContract,
  leasesContract,
  recordedRepliesContract,
  completionContract,
  deadLettersContract,
  drainContract,
  queueBytesContract,
  cacheContract,
  concurrencyContract,
];

export function describeStoreContract(name: string, target: StoreUnderTest): void {
  describe(`store contract: ${name}`, () => {
    const opened: Store[] = [];
    const open = async (options?: StoreOptions): Promise<Store> => {
      const store = await target.open(options);
      opened.push(store);
      return store;
    };
    afterEach(async () => {
      const stores = opened.splice(0);
      for (const store of stores) await (target.cleanup ? target.cleanup(store) : store.close());
    });
    for (const part of PARTS) part({ open, durable: target.durable });
  });
}
