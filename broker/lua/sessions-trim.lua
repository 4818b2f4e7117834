--[[ sessions-trim: pops, from each queue's head, the entries whose packet expired, then the
oldest over the bound (their packets released).
KEYS: the clients' queues (outgoing:{clientId})
ARGV[1] the connection's key prefix  ARGV[2] most entries per queue
Returns {dropped as over the bound, dropped as expired}
]]
--- @include "release"
local prefix, max = ARGV[1], tonumber(ARGV[2])
local full, expired = 0, 0
for _, queue in ipairs(KEYS) do
  local head = redis.call('LINDEX', queue, 0)
  while head and redis.call('EXISTS', prefix .. head) == 0 do
    redis.call('LPOP', queue)
    expired = expired + 1
    head = redis.call('LINDEX', queue, 0)
  end
  local over = redis.call('LLEN', queue) - max
  if over > 0 then
    for _, entry in ipairs(redis.call('LPOP', queue, over)) do release(prefix, entry) end
    full = full + over
  end
end
return {full, expired}
