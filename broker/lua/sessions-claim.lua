--[[ sessions-claim: removes and returns the sessions whose expiry passed.
KEYS[1] the sessions' expiry zset
ARGV[1] now (ms)  ARGV[2] most ids  ARGV[3] key prefix of the device sets
]]
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('SREM', ARGV[3] .. string.match(id, '^[^.]*'), id)
end
return ids
