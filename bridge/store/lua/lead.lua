--[[ lead: coalescing. Makes the job the one calling the upstream for a cache key unless a
live leader exists. The value is jobKey|expiresAt, compared with `now`; PX is a backstop.
KEYS[1] flight:{cacheKey}
ARGV[1] job key  ARGV[2] lease ms  ARGV[3] now ms
Returns the leader's job key.
]]
local rcall = redis.call
local now, leaseMs = tonumber(ARGV[3]), tonumber(ARGV[2])
local current = rcall('GET', KEYS[1])
if current then
  local leader, expires = string.match(current, '^(.*)|(%d+)$')
  if leader ~= ARGV[1] and tonumber(expires) > now then return leader end
end
rcall('SET', KEYS[1], ARGV[1] .. '|' .. tostring(now + leaseMs), 'PX', leaseMs + 60000)
return ARGV[1]
