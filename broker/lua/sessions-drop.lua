--[[ sessions-drop: releases every entry of a client's queue, then the queue.
KEYS[1] the client's queue  ARGV[1] the connection's key prefix
Returns 1 when the queue existed, else 0
]]
--- @include "release"
for _, entry in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  if redis.call('EXISTS', ARGV[1] .. entry) == 1 then release(ARGV[1], entry) end
end
return redis.call('DEL', KEYS[1])
