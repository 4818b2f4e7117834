--[[ sessions-adopt: registers the sessions kept from before these bounds existed, so that they
expire too, a slice at a time.
KEYS[1] aedes' set of clients with persistent subscriptions  KEYS[2] the sessions' expiry zset
ARGV[1] SSCAN cursor  ARGV[2] expiry (ms)  ARGV[3] key prefix of the device sets
Returns {next cursor, how many registered}
]]
local scan = redis.call('SSCAN', KEYS[1], ARGV[1], 'COUNT', 500)
local adopted = 0
for _, id in ipairs(scan[2]) do
  if redis.call('ZADD', KEYS[2], 'NX', ARGV[2], id) == 1 then
    redis.call('SADD', ARGV[3] .. string.match(id, '^[^.]*'), id)
    adopted = adopted + 1
  end
end
return {scan[1], adopted}
