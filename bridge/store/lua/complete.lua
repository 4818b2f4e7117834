--[[ complete: the job ended with `reply`. Remember it for the idempotency window, drop the
owner's lease and lock (not someone else's: a lease reaped and re-claimed belongs to the new
holder), take the job out of the queue if it went back there meanwhile, forget it (and its
recorded reply), and keep it on the dead-letter list if asked.
KEYS[1] idem:{jobKey}  KEYS[2] jobs  KEYS[3] attempts  KEYS[4] leases  KEYS[5] owners
KEYS[6] locks  KEYS[7] parked  KEYS[8] queue  KEYS[9] place  KEYS[10] dlq
KEYS[11] deadlines  KEYS[12] depth  KEYS[13] recorded
ARGV[1] job key  ARGV[2] reply JSON  ARGV[3] ttl ms  ARGV[4] now ms  ARGV[5] owner or ''
ARGV[6] dead-letter entry JSON, or '' to keep none
The answer's bookkeeping rides along, so a request costs one round trip here, not four. The
keys that follow are present only for what is asked, in this order:
ARGV[7] cache value ('' = none) with ARGV[8] its ttl ms: KEYS[next] cache:{hash}
ARGV[9] '1' = end this job's coalescing flight: KEYS[next] its key (the cache key)
ARGV[10] '1' = add usage, ARGV[11..17] as usage.lua's ARGV[1..7]: KEYS[next] usage:{hour}
]]
local rcall = redis.call
--- @include "members"
--- @include "queue"
--- @include "admission"
--- @include "usage"
--- @include "flight"

local key, ttlMs, now, owner = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
recordReply(KEYS[1], ARGV[2], now, ttlMs)

local held = rcall('HGET', KEYS[5], key)
local holder = held and unpackOwner(held)
if held == false or holder == owner then
  if held then
    local _, _, _, _, member = unpackOwner(held)
    local _, _, lockId = parseMember(member)
    rcall('ZREM', KEYS[4], key)
    rcall('HDEL', KEYS[5], key)
    unlock(KEYS[6], KEYS[7], KEYS[8], KEYS[9], lockId, key)
  end
  -- Reaped back into the queue while its first holder was still answering it.
  dequeue(KEYS[8], KEYS[7], KEYS[9], KEYS[11], KEYS[12], key)
  rcall('HDEL', KEYS[2], key)
  rcall('HDEL', KEYS[3], key)
  rcall('HDEL', KEYS[13], key)
end
if ARGV[6] ~= '' then rcall('RPUSH', KEYS[10], ARGV[6]) end

local nextKey = 14
if ARGV[7] ~= '' then
  rcall('SET', KEYS[nextKey], ARGV[7], 'PX', ARGV[8])
  nextKey = nextKey + 1
end
if ARGV[9] == '1' then
  -- A cached answer has just replaced the flight.
  if ARGV[7] == '' then endFlight(KEYS[nextKey], key) end
  nextKey = nextKey + 1
end
if ARGV[10] == '1' then
  addUsage(KEYS[nextKey], ARGV[11], ARGV[12], ARGV[13], ARGV[14], ARGV[15], ARGV[16], ARGV[17])
end
return 1
