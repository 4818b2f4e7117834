// The memory store: the Store contract, and what only it does.
import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../bridge/store/memory.js';
import { describeStoreContract } from './store-contract.js';

describeStoreContract('memory', { durable: false, open: async (options) => new MemoryStore(options) });

describe('memory store', () => {
  it('is not durable', () => {
    expect(new MemoryStore().durable).toBe(false);
  });
});
