--[[ sessions-open: registers a persistent session, unless its device holds the most already.
KEYS[1] the device's set of session client ids  KEYS[2] the sessions' expiry zset
ARGV[1] client id  ARGV[2] most sessions for the device  ARGV[3] its expiry (ms)
Returns 1 registered, 0 refused
]]
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then
  if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
  redis.call('SADD', KEYS[1], ARGV[1])
end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return 1
