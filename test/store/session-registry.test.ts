// The plant's-broker session registry on a real Redis (Redis only: on the memory store there is
// one process and nobody to adopt its sessions): liveness leases, one fenced adoption claim per
// death, and a start or a renewal of the instance that ends the claim.
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { RedisSessionRegistry } from '../../bridge/store/redis-session-registry.js';
import type { SessionRecord } from '../../bridge/store/session-registry.js';
import { connectRedis, deletePrefix, uniquePrefix } from '../helpers/redis.js';

const redis = connectRedis();
let prefix = '';
const LEASE_MS = 150;
/** Long enough for a lease of LEASE_MS to lapse (Redis expires it on its own clock). */
const PAST_LEASE_MS = LEASE_MS + 100;

afterEach(async () => {
  if (prefix) await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

function fresh(): RedisSessionRegistry {
  prefix = uniquePrefix('sessions');
  return new RedisSessionRegistry(redis, prefix);
}

const record = (instanceId: string): Omit<SessionRecord, 'generation'> => ({
  instanceId,
  group: 'g',
  clientIds: [instanceId, `${instanceId}-1`],
  sessionExpiryS: 300,
});

/** Joins `a` and lets its lease lapse: the record as a survivor finds it. */
async function dead(registry: RedisSessionRegistry, instanceId = 'a'): Promise<SessionRecord> {
  await registry.join(record(instanceId), LEASE_MS);
  await sleep(PAST_LEASE_MS);
  const [found] = await registry.lapsed();
  if (!found) throw new Error('no lapsed record');
  return found;
}

describe('session registry (Redis)', () => {
  it('lists an instance only once its lease lapsed, with its client ids', async () => {
    const registry = fresh();
    const generation = await registry.join(record('a'), LEASE_MS);
    expect(await registry.lapsed()).toEqual([]);
    expect(await registry.renew('a', generation, LEASE_MS)).toBe('held');
    await sleep(PAST_LEASE_MS);
    expect(await registry.lapsed()).toEqual([{ ...record('a'), generation }]);
  });

  it('grants one claim per death: a second adopter gets none, and the claimed record is no longer listed', async () => {
    const registry = fresh();
    const found = await dead(registry);
    const first = await registry.claim(found, 'b', 1000);
    expect(first?.token).toMatch(/^b\|\d+$/);
    expect(await registry.claim(found, 'c', 1000)).toBeUndefined();
    expect(await registry.lapsed()).toEqual([]);
  });

  it('ends the claim when the instance starts again, and the new start keeps its record', async () => {
    const registry = fresh();
    const found = await dead(registry);
    const claim = await registry.claim(found, 'b', 1000);
    const again = await registry.join(record('a'), 1000);
    expect(again).toBeGreaterThan(found.generation);
    expect(await registry.hold(claim!, 1000)).toBe(false);
    await registry.release(claim!, true);
    expect(await registry.renew('a', again, 1000)).toBe('held');
    // The old start's own renewal (a paused process waking up) is told it was replaced.
    expect(await registry.renew('a', found.generation, 1000)).toBe('replaced');
  });

  it('ends the claim when the instance renews its lease (it was only paused)', async () => {
    const registry = fresh();
    const found = await dead(registry);
    const claim = await registry.claim(found, 'b', 1000);
    expect(await registry.hold(claim!, 1000)).toBe(true);
    expect(await registry.renew('a', found.generation, 1000)).toBe('held');
    expect(await registry.hold(claim!, 1000)).toBe(false);
  });

  it('removes the record once adopted: the instance, if it wakes, finds it gone', async () => {
    const registry = fresh();
    const found = await dead(registry);
    const claim = await registry.claim(found, 'b', 1000);
    await registry.release(claim!, true);
    expect(await registry.lapsed()).toEqual([]);
    expect(await registry.renew('a', found.generation, 1000)).toBe('gone');
  });

  it('keeps the record when an adoption did not finish, for the next adopter', async () => {
    const registry = fresh();
    const found = await dead(registry);
    const claim = await registry.claim(found, 'b', 1000);
    await registry.release(claim!, false);
    expect(await registry.lapsed()).toEqual([found]);
  });

  it('lets another adopter take over once the claim runs out (the adopter died), with a higher fencing number', async () => {
    const registry = fresh();
    const found = await dead(registry);
    const first = await registry.claim(found, 'b', LEASE_MS);
    await sleep(PAST_LEASE_MS);
    const second = await registry.claim(found, 'c', 1000);
    const fence = (token: string | undefined): number => Number(token?.split('|')[1]);
    expect(fence(second?.token)).toBeGreaterThan(fence(first?.token));
    expect(await registry.hold(first!, 1000)).toBe(false);
    // A late release by the first adopter removes nothing.
    await registry.release(first!, true);
    expect(await registry.hold(second!, 1000)).toBe(true);
  });

  it('leave removes only its own start, or any start without a generation', async () => {
    const registry = fresh();
    const old = await registry.join(record('a'), LEASE_MS);
    const current = await registry.join(record('a'), LEASE_MS);
    await registry.leave('a', old);
    expect(await registry.renew('a', current, LEASE_MS)).toBe('held');
    await registry.leave('a');
    expect(await registry.renew('a', current, LEASE_MS)).toBe('gone');
  });
});
