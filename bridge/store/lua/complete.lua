--[[ complete: the job ended with `reply`. Remember it for the idempotency window (the answer
replaces the job record, so the job is forgotten in the same write), drop the owner's lease
and lock (not someone else's: a lease reaped and re-claimed belongs to the new holder, and
the answer then waits beside that holder's record), take the job out of the queue if it went
back there meanwhile, and keep it on the dead-letter list if asked (within its bounds).
KEYS[1] the job's record  KEYS[2] cache:{hash} when ARGV[8] or ARGV[10] asks for it
ARGV[1] the key prefix (includes/keys.lua)  ARGV[2] job key  ARGV[3] reply JSON  ARGV[4] ttl ms  ARGV[5] now ms
ARGV[6] owner or ''  ARGV[7] the dead letter, or '' to keep none: '<DLQ_MAX>|<DLQ_MAX_BYTES>|
  <oldest time kept>|<time>|<entry JSON>' (includes/dead-letters.lua)
ARGV[8] cache value ('' = none) with ARGV[9] its ttl ms
ARGV[10] '1' = end this job's coalescing flight (the same key as the cache entry)
ARGV[11] how many budget reservations the job holds: their spend keys close KEYS, and ARGV[12..]
  holds them (includes/spend.lua). Settled by the job's first answer only, which turns its
  record into a string or gives it `x`: a stale holder's answer, the new holder's after it, or
  a completion retried after a lost Redis answer, never spend twice.
Returns how many dead letters the bounds dropped.
]]
--- @include "keys"
--- @include "members"
--- @include "records"
--- @include "fair"
--- @include "queue"
--- @include "flight"
--- @include "spend"
--- @include "dead-letters"

local key, reply, ttlMs, now, owner = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local kRecord = KEYS[1]
local charges = tonumber(ARGV[11])
if charges > 0 and rcall('TYPE', kRecord)['ok'] == 'hash' and rcall('HEXISTS', kRecord, 'x') == 0 then
  settleSpend(KEYS, ARGV, #KEYS - charges + 1, 12, charges)
end
local v = readJob(kRecord, 'o', 'w', 'b', 'i')
local held = v[1] ~= '' and v[1] or nil
if held and unpackOwner(held) ~= owner then
  rcall('HSET', kRecord, 'x', tostring(now + ttlMs), 'y', reply)
else
  if held then
    local _, _, _, _, member = unpackOwner(held)
    local _, _, lockId = parseMember(member)
    rcall('ZREM', K.leases, key)
    unlock(lockId, key)
  end
  -- Reaped back into the queue while its first holder was still answering it.
  dequeue(key, v[2])
  dropBytes(kRecord, v[3], v[4], true)
  recordReply(kRecord, reply, now, ttlMs)
end
local dropped = 0
if ARGV[7] ~= '' then dropped = dlqAdd(key, ARGV[7]) end
if ARGV[8] ~= '' then
  rcall('SET', KEYS[2], ARGV[8], 'PX', ARGV[9])
elseif ARGV[10] == '1' then
  endFlight(KEYS[2], key)
end
return dropped
