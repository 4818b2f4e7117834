--[[ sessions-total: the entries in the queues of a slice of the sessions.
KEYS[1] the sessions' expiry zset
ARGV[1] the connection's key prefix  ARGV[2] first rank  ARGV[3] last rank
Returns {entries, how many sessions the slice had}
]]
--- @include "encode"
local total = 0
local ids = redis.call('ZRANGE', KEYS[1], ARGV[2], ARGV[3])
for _, id in ipairs(ids) do
  total = total + redis.call('LLEN', ARGV[1] .. 'outgoing:' .. encode(id))
end
return {total, #ids}
