--[[ lead: coalescing in one step, for every job of a claim at once. For each job: the
cached answer if there is one by now; else makes the job the one calling the upstream for
its cache key unless a live leader exists. Values carry their expiry (cache: expiresAt|answer
JSON; flight: F jobKey|expiresAt, in the same key until the answer replaces it), compared with
`now`; PX is a backstop. Jobs are handled in order, so of two identical ones in one call the
first leads.
KEYS[2i-1] cache:{cacheKey of job i}  KEYS[2i] its flight (the same key)
ARGV[1] lease ms  ARGV[2] now ms  ARGV[2+i] job i's key
Returns, flat, per job: 'answer', answer JSON | 'leader', the leader's job key.
]]
--- @include "cache"
--- @include "flight"

local leaseMs, now = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {}
for i = 1, #ARGV - 2 do
  local answer, current = freshAnswer(KEYS[2 * i - 1], now)
  if answer then
    out[#out + 1] = 'answer'
    out[#out + 1] = answer
  else
    out[#out + 1] = 'leader'
    out[#out + 1] = takeFlight(KEYS[2 * i], ARGV[2 + i], leaseMs, now, current)
  end
end
return out
