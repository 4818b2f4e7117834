--[[ lead: coalescing in one step, for every job of a claim at once. For each job: the
cached answer if there is one by now; else makes the job the one calling the upstream for
its cache key unless a live leader exists. Values carry their expiry (cache: expiresAt|answer
JSON; flight: jobKey|expiresAt), compared with `now`; PX is a backstop. Jobs are handled in
order, so of two identical ones in one call the first leads.
KEYS[2i-1] cache:{cacheKey of job i}  KEYS[2i] flight:{cacheKey of job i}
ARGV[1] lease ms  ARGV[2] now ms  ARGV[2+i] job i's key
Returns, flat, per job: 'answer', answer JSON | 'leader', the leader's job key.
]]
local rcall = redis.call
--- @include "cache"

local leaseMs, now = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {}
for i = 1, #ARGV - 2 do
  local kCache, kFlight, jobKey = KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 + i]
  local answer = freshAnswer(kCache, now)
  local leader = nil
  if not answer then
    local current = rcall('GET', kFlight)
    if current then
      local holder, expires = string.match(current, '^(.*)|(%d+)$')
      if holder ~= jobKey and tonumber(expires) > now then leader = holder end
    end
    if not leader then
      rcall('SET', kFlight, jobKey .. '|' .. tostring(now + leaseMs), 'PX', leaseMs + 60000)
      leader = jobKey
    end
  end
  if answer then
    out[#out + 1] = 'answer'
    out[#out + 1] = answer
  else
    out[#out + 1] = 'leader'
    out[#out + 1] = leader
  end
end
return out
