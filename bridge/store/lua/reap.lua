--[[ reap: leases that ran out go back to the queue with attempts + 1, or, once attempts
reach the limit, are returned for a final reply (the caller completes them). A job with a
recorded reply (record.lua) always goes back to the queue: its next claim publishes that
reply, where a final reply of our own would be a second, different one.
KEYS[1] the queue (routes the call; includes/keys.lua)
ARGV[1] the key prefix (includes/keys.lua)  ARGV[2] now ms  ARGV[3] max attempts  ARGV[4] most leases handled in one call
Returns flat {jobJSON, attempts}... of the exhausted jobs.
]]
--- @include "keys"
--- @include "members"
--- @include "records"
--- @include "fair"
--- @include "queue"

local exhausted = {}
for _, key in ipairs(rcall('ZRANGEBYSCORE', K.leases, '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[4]))) do
  rcall('ZREM', K.leases, key)
  local r = rec(key)
  local v = readJob(r, 'o', 'r', 'j')
  if v[1] and v[1] ~= '' then
    local _, _, score, deadline, member = unpackOwner(v[1])
    local _, _, lockId = parseMember(member)
    rcall('HSET', r, 'o', '')
    unlock(lockId, key)
    local attempts = rcall('HINCRBY', r, 'a', 1)
    if attempts >= tonumber(ARGV[3]) and not v[2] then
      letGo(r)
      exhausted[#exhausted + 1] = v[3]
      exhausted[#exhausted + 1] = tostring(attempts)
    else
      enqueue(score, deadline, member)
    end
  end
end
return exhausted
