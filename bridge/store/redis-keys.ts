// Every Redis key of one deployment. All share the hash tag `{prefix}`, so every script's
// keys live in one slot and run unchanged on Redis Cluster. Every key a script touches is
// passed in KEYS, except the deployment's fixed keys and the job records of jobs a script
// finds in the queue or the leases: it names those from the prefix (ARGV[1]), in the same slot.
//
//   {p}:queue      zset   ready jobs; score = arrival + priority offset; member
//                         seq|priority|lockId|tokens|jobKey (seq breaks score ties FIFO)
//   {p}:parked     zset   jobs waiting for a held lock; all score 0, member
//                         lockId|score(16 digits)|queue member (lex order = lock, then score)
//   {p}:deadlines  zset   jobKey → arrival + ttl_ms, for waiting jobs (prompt `expired`)
//   {p}:depth      hash   priority → waiting jobs
//   {p}:leases     zset   jobKey → lease expiry (ms) for running jobs
//   {p}:locks      hash   lockId → holding jobKey (held while that job's lease runs)
//   {p}:fences     hash   lockId → last fencing number granted
//   {p}:budget     hash   the upstream's rolling window (lua/includes/window.lua): calls (c<bucket>)
//                         and tokens (t<bucket>) per 2 s bucket, and `pause`: paused until (ms), after a 429
//   {p}:seq        string counter for members
//   {p}:dlq        list   dead-letter entries (JSON {job, reply, atMs})
//   {p}:idem:{deviceId}/{id}  the job record and idempotency record in one key: a hash while
//                             the job lives (its data, attempts, holder, place, recorded reply:
//                             lua/includes/records.lua), then the string 'd<exp>|<reply>'
//   {p}:quota:{deviceId}      hash  the device's admissions, a rolling window like the budget's
//   {p}:cache:{sha256}        string  expiresAt|answer JSON of a successful answer (PX = CACHE_TTL_S),
//                             or, until there is one, the coalescing flight: F<leader job key>|<lease end>
//   {p}:usage:{hour}          hash  token and cost totals of one hour (by device, model, priority)
//   {p}:breaker:{provider}    hash  the provider's circuit state, shared by every instance
//   {p}:class:{priority}      zset  the class's waiting jobs: queue member → score (fair share, lua/includes/fair.lua)
//   {p}:lane:{priority}:{deviceId}  zset  one device's waiting jobs of the class: queue member → score
//   {p}:fair:{priority}       zset  a marker per waiting device (next job's score|seq|device) → its service counter
//   {p}:reports               hash  instance → its latest operator-dashboard report (instance-reports.ts)
//   {p}:instances             pub/sub channel (not a key) every instance stays subscribed
//                             to, so PUBSUB NUMSUB counts them (broker/presence.ts)
//   {p}:dashboard:devices     pub/sub channel (not a key): an operator's device search, asked
//                             of every instance; each answers on …:devices:{instance}
//
// lockId is the SHA-1 of the request's `lock`, so any lock string is safe inside members.
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

export function redisKeys(prefix: string) {
  const p = `{${prefix}}`;
  // Named in Lua from the prefix (lua/includes/keys.lua): these names must match.
  const fixed = {
    queue: `${p}:queue`,
    parked: `${p}:parked`,
    deadlines: `${p}:deadlines`,
    depth: `${p}:depth`,
    leases: `${p}:leases`,
    locks: `${p}:locks`,
    fences: `${p}:fences`,
    budget: `${p}:budget`,
    seq: `${p}:seq`,
    dlq: `${p}:dlq`,
  };
  return {
    ...fixed,
    /** ARGV[1] of every function but lead, unlead and usage: they name the fixed keys from it (lua/includes/keys.lua). */
    base: `${p}:`,
    idem: (jobKey: string) => `${p}:idem:${jobKey}`,
    quota: (deviceId: string) => `${p}:quota:${deviceId}`,
    cache: (hash: string) => `${p}:cache:${hash}`,
    /** The same key as the cache entry: the answer replaces the flight in one write. */
    flight: (hash: string) => `${p}:cache:${hash}`,
    usage: (hour: string) => `${p}:usage:${hour}`,
    breaker: (provider: string) => `${p}:breaker:${provider}`,
    instances: `${p}:instances`,
    reports: `${p}:reports`,
    /** Pub/sub channel (not a key): the operator dashboard asks every instance about a device. */
    deviceQuery: `${p}:dashboard:devices`,
    /** Keys 0.6 kept and this version no longer does, read once by RedisStore.upgrade. */
    legacy: ['jobs', 'attempts', 'place', 'owners', 'recorded', 'calls', 'calltokens', 'pause'].map((name) => `${p}:${name}`),
    /** Matches every key of the deployment (tests clean up with it). */
    pattern: `${p}:*`,
  };
}

export type RedisKeys = ReturnType<typeof redisKeys>;

export const lockId = (lock: string | undefined): string =>
  lock === undefined ? '-' : createHash('sha1').update(lock).digest('hex');

/** Deletes every key of one deployment prefix, and only those (tests, benchmarks, teardown). */
export async function deleteDeployment(redis: Redis, prefix: string): Promise<void> {
  const pattern = redisKeys(prefix).pattern;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}
