--[[ release: hands jobs `owner` holds back to the queue (shutdown); attempts unchanged.
KEYS[1] the queue (routes the call; includes/keys.lua)
ARGV[1] the key prefix (includes/keys.lua)  ARGV[2] owner  ARGV[3..] job keys
]]
--- @include "keys"
--- @include "members"
--- @include "records"
--- @include "fair"
--- @include "queue"

for i = 3, #ARGV do
  local key = ARGV[i]
  local held = readJob(rec(key), 'o')[1]
  if held and held ~= '' then
    local holder, _, score, deadline, member = unpackOwner(held)
    if holder == ARGV[2] then
      local _, _, lockId = parseMember(member)
      rcall('ZREM', K.leases, key)
      rcall('HSET', rec(key), 'o', '')
      unlock(lockId, key)
      enqueue(score, deadline, member)
    end
  end
end
return 1
