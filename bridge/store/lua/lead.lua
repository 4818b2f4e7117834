--[[ lead: coalescing in one step. The cached answer if there is one by now; else makes the
job the one calling the upstream for its cache key unless a live leader exists. Values carry
their expiry (cache: expiresAt|answer JSON; flight: jobKey|expiresAt), compared with `now`;
PX is a backstop.
KEYS[1] cache:{cacheKey}  KEYS[2] flight:{cacheKey}
ARGV[1] job key  ARGV[2] lease ms  ARGV[3] now ms
Returns {'answer', answer JSON} or {'leader', the leader's job key}.
]]
local rcall = redis.call
local now, leaseMs = tonumber(ARGV[3]), tonumber(ARGV[2])
local cached = rcall('GET', KEYS[1])
if cached then
  local expires, answer = string.match(cached, '^(%d+)|(.*)$')
  if tonumber(expires) > now then return {'answer', answer} end
end
local current = rcall('GET', KEYS[2])
if current then
  local leader, expires = string.match(current, '^(.*)|(%d+)$')
  if leader ~= ARGV[1] and tonumber(expires) > now then return {'leader', leader} end
end
rcall('SET', KEYS[2], ARGV[1] .. '|' .. tostring(now + leaseMs), 'PX', leaseMs + 60000)
return {'leader', ARGV[1]}
