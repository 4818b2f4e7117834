--[[ drain: removes and returns every queued and parked job, and forgets their records (so a
repeat after the shutdown is admitted afresh) and the fair-share lanes and counters.
KEYS[1] the queue (routes the call; includes/keys.lua)
ARGV[1] the key prefix (includes/keys.lua)
Returns flat {jobJSON, attempts}...
]]
--- @include "keys"
--- @include "members"
--- @include "fair"

local out = {}
local lanes = {}
local function take(member)
  local _, prio, _, _, key = parseMember(member)
  lanes[laneKey(prio, deviceOf(key))] = true
  local v = rcall('HMGET', rec(key), 'j', 'a')
  out[#out + 1] = v[1]
  out[#out + 1] = v[2] or '0'
  forgetBytes(rec(key))
  rcall('DEL', rec(key))
  rcall('ZREM', K.deadlines, key)
end
for _, member in ipairs(rcall('ZRANGE', K.queue, 0, -1)) do take(member) end
for _, parked in ipairs(rcall('ZRANGE', K.parked, 0, -1)) do
  local _, member = unparkMember(parked)
  take(member)
end
rcall('DEL', K.queue, K.parked, K.depth)
CALL.waiting = nil
for lane in pairs(lanes) do rcall('DEL', lane) end
for _, prio in ipairs(PRIORITIES) do rcall('DEL', fairKey(prio), classKey(prio)) end
return out
