--[[ drain: removes and returns every queued and parked job.
KEYS[1] queue  KEYS[2] parked  KEYS[3] jobs  KEYS[4] attempts  KEYS[5] place
KEYS[6] deadlines  KEYS[7] depth  KEYS[8] recorded
Returns flat {jobJSON, attempts}...
]]
local rcall = redis.call
--- @include "members"

local out = {}
local function take(member)
  local _, _, _, _, key = parseMember(member)
  out[#out + 1] = rcall('HGET', KEYS[3], key)
  out[#out + 1] = rcall('HGET', KEYS[4], key) or '0'
  rcall('HDEL', KEYS[3], key)
  rcall('HDEL', KEYS[4], key)
  rcall('HDEL', KEYS[5], key)
  rcall('HDEL', KEYS[8], key)
  rcall('ZREM', KEYS[6], key)
end
for _, member in ipairs(rcall('ZRANGE', KEYS[1], 0, -1)) do take(member) end
for _, parked in ipairs(rcall('ZRANGE', KEYS[2], 0, -1)) do
  local _, member = unparkMember(parked)
  take(member)
end
rcall('DEL', KEYS[1], KEYS[2], KEYS[7])
return out
