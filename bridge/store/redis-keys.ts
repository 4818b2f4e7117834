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
//   {p}:fence      string the last fencing number granted: one counter for every lock, so a
//                         key's fences rise and no lock name is kept (upgrade-fences.lua moves
//                         0.7's {p}:fences hash, lockId → last number, into it)
//   {p}:budget     hash   the upstream's rolling window (lua/includes/window.lua): calls (c<bucket>)
//                         and tokens (t<bucket>) per 2 s bucket, and `pause`: paused until (ms), after a 429
//   {p}:seq        string counter for members
//   {p}:dlq:index  zset   dead letters, oldest first: members '<time, 13 digits>|<job key>', all
//                         score 0 (lex order; lua/includes/dead-letters.lua)
//   {p}:dlq:entries hash  job key → '<time>|<entry JSON {job, reply, atMs}>'
//   {p}:dlq:bytes  string the entries' total size, bounded by DLQ_MAX_BYTES
//   {p}:qbytes     string the stored size of every job admitted and not yet answered (each
//                         record's b), for QUEUE_MAX_BYTES
//   {p}:idem:{deviceId}/{id}  the job record and idempotency record in one key: a hash while
//                             the job lives (its data, attempts, holder, place, recorded reply:
//                             lua/includes/records.lua), then the string 'd<exp>|<reply>'
//   {p}:quota:{deviceId}      hash  the device's admissions, a rolling window like the budget's
//   {p}:img:{sha256}          hash  a raw image's base64 (d), once however many jobs carry it, and
//                             how many job records hold it (n): gone with the last of them, or
//                             IDEMPOTENCY_TTL_S after the latest admission that named it
//   {p}:cache:{sha256}        string  expiresAt|answer JSON of a successful answer (PX = CACHE_TTL_S),
//                             or, until there is one, the coalescing flight: F<leader job key>|<lease end>
//   {p}:usage:{hour}          hash  token and cost totals of one hour (by device, model, priority)
//   {p}:breaker:{provider}    hash  the provider's circuit state, shared by every instance
//   {p}:class:{priority}      zset  the class's waiting jobs: queue member → score (fair share, lua/includes/fair.lua)
//   {p}:lane:{priority}:{deviceId}  zset  one device's waiting jobs of the class: queue member → score
//   {p}:fair:{priority}       zset  a marker per waiting device (next job's score|seq|device) → its service counter
//   {p}:reports               hash  instance → its latest operator-dashboard report (instance-reports.ts)
//   {p}:instances             pub/sub channel (not a key) every instance stays subscribed
//                             to, so PUBSUB NUMSUB counts them (presence.ts)
//   {p}:dashboard:devices     pub/sub channel (not a key): an operator's device search, asked
//                             of every instance; each answers on …:devices:{instance}
//   {p}:scada:good            zset  deviceId/template → when its last good answer was kept (ms):
//                             recency for SCADA_MAX_TAGS, age for SCADA_TAG_TTL_S (redis-scada-state.ts)
//   {p}:scada:records         hash  deviceId/template → its last good answer (ScadaAnswer JSON)
//   {p}:scada:bdseq:{node}    string  the Sparkplug Edge Node's last bdSeq (0–255), no expiry
//   {p}:scada:lease:{node}    string  the instance publishing the Edge Node (PX = the lease)
//   {p}:scada:session:{node}  string  the bdSeq of the Edge Node session whose NDEATH is not out yet, no expiry
//   {p}:scada:events          pub/sub channel (not a key): answers and devices gone, handed to
//                             the instance publishing the Edge Node
//   {p}:sessions              hash  instance → '<generation>|<JSON: share group, client ids, session
//                             expiry>': its sessions on the plant's broker (session-registry.ts)
//   {p}:sessions:seq          string  the last generation or adoption fencing number granted
//   {p}:alive:{instance}      string  the generation whose liveness lease runs (PX = the lease)
//   {p}:adopt:{instance}      string  '<adopter>|<fencing number>': an adoption of its sessions under
//                             way (PX = the claim's lease)
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
    fence: `${p}:fence`,
    budget: `${p}:budget`,
    seq: `${p}:seq`,
    /** K['dlq:index'], K['dlq:entries'], K['dlq:bytes'] in Lua. */
    dlqIndex: `${p}:dlq:index`,
    dlqEntries: `${p}:dlq:entries`,
    dlqBytes: `${p}:dlq:bytes`,
    qbytes: `${p}:qbytes`,
  };
  return {
    ...fixed,
    /** ARGV[1] of every function but lead, unlead and usage: they name the fixed keys from it (lua/includes/keys.lua). */
    base: `${p}:`,
    idem: (jobKey: string) => `${p}:idem:${jobKey}`,
    quota: (deviceId: string) => `${p}:quota:${deviceId}`,
    cache: (hash: string) => `${p}:cache:${hash}`,
    image: (sha256: string) => `${p}:img:${sha256}`,
    /** The same key as the cache entry: the answer replaces the flight in one write. */
    flight: (hash: string) => `${p}:cache:${hash}`,
    usage: (hour: string) => `${p}:usage:${hour}`,
    breaker: (provider: string) => `${p}:breaker:${provider}`,
    instances: `${p}:instances`,
    reports: `${p}:reports`,
    /** Pub/sub channel (not a key): the operator dashboard asks every instance about a device. */
    deviceQuery: `${p}:dashboard:devices`,
    scadaGood: `${p}:scada:good`,
    scadaRecords: `${p}:scada:records`,
    scadaBdSeq: (node: string) => `${p}:scada:bdseq:${node}`,
    scadaLease: (node: string) => `${p}:scada:lease:${node}`,
    scadaSession: (node: string) => `${p}:scada:session:${node}`,
    /** Pub/sub channel (not a key): every instance's SCADA events, for the Edge Node's publisher. */
    scadaEvents: `${p}:scada:events`,
    sessions: `${p}:sessions`,
    sessionSeq: `${p}:sessions:seq`,
    alive: (instanceId: string) => `${p}:alive:${instanceId}`,
    adoption: (instanceId: string) => `${p}:adopt:${instanceId}`,
    /** 0.7's fences, one field per lock name ever granted; RedisStore.upgrade folds them into `fence`. */
    oldFences: `${p}:fences`,
    /** 0.7's dead-letter list (entry JSON); RedisStore.upgrade moves it into the bounded one. */
    oldDlq: `${p}:dlq`,
    /** Keys 0.6 kept and this version no longer does, read once by RedisStore.upgrade. */
    legacy: ['jobs', 'attempts', 'place', 'owners', 'recorded', 'calls', 'calltokens', 'pause'].map((name) => `${p}:${name}`),
    /** Matches every key of the deployment (tests clean up with it). */
    pattern: `${p}:*`,
  };
}

export type RedisKeys = ReturnType<typeof redisKeys>;

export const lockId = (lock: string | undefined): string => (lock === undefined ? '-' : createHash('sha1').update(lock).digest('hex'));

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
