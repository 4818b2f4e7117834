--[[ reap: leases that ran out go back to the queue with attempts + 1, or, once attempts
reach the limit, are returned for a final reply (the caller completes them). A job with a
recorded reply (record.lua) always goes back to the queue: its next claim publishes that
reply, where a final reply of our own would be a second, different one.
KEYS[1] leases  KEYS[2] owners  KEYS[3] locks  KEYS[4] parked  KEYS[5] queue  KEYS[6] place
KEYS[7] deadlines  KEYS[8] depth  KEYS[9] jobs  KEYS[10] attempts  KEYS[11] recorded
ARGV[1] now ms  ARGV[2] max attempts  ARGV[3] most leases handled in one call
Returns flat {jobJSON, attempts}... of the exhausted jobs.
]]
local rcall = redis.call
--- @include "members"
--- @include "queue"

local exhausted = {}
for _, key in ipairs(rcall('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))) do
  rcall('ZREM', KEYS[1], key)
  local held = rcall('HGET', KEYS[2], key)
  rcall('HDEL', KEYS[2], key)
  if held then
    local _, _, score, deadline, member = unpackOwner(held)
    local _, _, lockId = parseMember(member)
    unlock(KEYS[3], KEYS[4], KEYS[5], KEYS[6], lockId, key)
    local attempts = rcall('HINCRBY', KEYS[10], key, 1)
    if attempts >= tonumber(ARGV[2]) and rcall('HEXISTS', KEYS[11], key) == 0 then
      exhausted[#exhausted + 1] = rcall('HGET', KEYS[9], key)
      exhausted[#exhausted + 1] = tostring(attempts)
    else
      enqueue(KEYS[5], KEYS[6], KEYS[7], KEYS[8], score, deadline, member)
    end
  end
end
return exhausted
