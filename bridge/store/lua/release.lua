--[[ release: hands jobs `owner` holds back to the queue (shutdown); attempts unchanged.
KEYS[1] leases  KEYS[2] owners  KEYS[3] locks  KEYS[4] parked  KEYS[5] queue  KEYS[6] place
KEYS[7] deadlines  KEYS[8] depth
ARGV[1] owner  ARGV[2..] job keys
]]
local rcall = redis.call
--- @include "members"
--- @include "queue"

for i = 2, #ARGV do
  local key = ARGV[i]
  local held = rcall('HGET', KEYS[2], key)
  if held then
    local holder, _, score, deadline, member = unpackOwner(held)
    if holder == ARGV[1] then
      local _, _, lockId = parseMember(member)
      rcall('ZREM', KEYS[1], key)
      rcall('HDEL', KEYS[2], key)
      unlock(KEYS[3], KEYS[4], KEYS[5], KEYS[6], lockId, key)
      enqueue(KEYS[5], KEYS[6], KEYS[7], KEYS[8], score, deadline, member)
    end
  end
end
return 1
