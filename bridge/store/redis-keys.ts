// Every Redis key of one deployment. All share the hash tag `{prefix}`, so every script's
// keys live in one slot and run unchanged on Redis Cluster. Every key a script touches is
// passed in KEYS.
//
//   {p}:queue      zset   ready jobs; score = arrival + priority offset; member
//                         seq|priority|lockId|tokens|jobKey (seq breaks score ties FIFO)
//   {p}:parked     zset   jobs waiting for a held lock; all score 0, member
//                         lockId|score(16 digits)|queue member (lex order = lock, then score)
//   {p}:place      hash   jobKey → 'q'+queue member | 'p'+parked member (where it waits)
//   {p}:deadlines  zset   jobKey → arrival + ttl_ms, for waiting jobs (prompt `expired`)
//   {p}:depth      hash   priority → waiting jobs
//   {p}:jobs       hash   jobKey → job JSON (immutable while the job lives)
//   {p}:attempts   hash   jobKey → attempts spent by holders whose lease ran out
//   {p}:leases     zset   jobKey → lease expiry (ms) for running jobs
//   {p}:owners     hash   jobKey → owner|fence|score|deadline|queue member
//   {p}:recorded   hash   jobKey → reply JSON recorded by its holder before publishing (record.lua):
//                         handed back by the next claim after a crash, dropped by complete
//   {p}:locks      hash   lockId → holding jobKey (held while that job's lease runs)
//   {p}:fences     hash   lockId → last fencing number granted
//   {p}:calls      zset   upstream calls in the rolling window; member seq:tokens, score time
//   {p}:calltokens string their token sum (RATE_LIMIT_TPM)
//   {p}:pause      string upstream paused until (ms), after a 429
//   {p}:seq        string counter for members
//   {p}:dlq        list   dead-letter entries (JSON {job, reply, atMs})
//   {p}:idem:{deviceId}/{id}  string  'p' (pending) or 'd<exp>|<reply>' — the idempotency record
//   {p}:dev:{deviceId}        zset  the device's admissions in the last minute
//   {p}:cache:{sha256}        string  expiresAt|answer JSON of a successful answer (PX = CACHE_TTL_S),
//                             or, until there is one, the coalescing flight: F<leader job key>|<lease end>
//   {p}:usage:{hour}          hash  token and cost totals of one hour (by device, model, priority)
//   {p}:breaker:{provider}    hash  the provider's circuit state, shared by every instance
//   {p}:instances             pub/sub channel (not a key) every instance stays subscribed
//                             to, so PUBSUB NUMSUB counts them (broker/presence.ts)
//
// lockId is the SHA-1 of the request's `lock`, so any lock string is safe inside members.
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

export function redisKeys(prefix: string) {
  const p = `{${prefix}}`;
  return {
    queue: `${p}:queue`,
    parked: `${p}:parked`,
    place: `${p}:place`,
    deadlines: `${p}:deadlines`,
    depth: `${p}:depth`,
    jobs: `${p}:jobs`,
    attempts: `${p}:attempts`,
    leases: `${p}:leases`,
    owners: `${p}:owners`,
    recorded: `${p}:recorded`,
    locks: `${p}:locks`,
    fences: `${p}:fences`,
    calls: `${p}:calls`,
    callTokens: `${p}:calltokens`,
    pause: `${p}:pause`,
    seq: `${p}:seq`,
    dlq: `${p}:dlq`,
    idem: (jobKey: string) => `${p}:idem:${jobKey}`,
    device: (deviceId: string) => `${p}:dev:${deviceId}`,
    cache: (hash: string) => `${p}:cache:${hash}`,
    /** The same key as the cache entry: the answer replaces the flight in one write. */
    flight: (hash: string) => `${p}:cache:${hash}`,
    usage: (hour: string) => `${p}:usage:${hour}`,
    breaker: (provider: string) => `${p}:breaker:${provider}`,
    instances: `${p}:instances`,
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
