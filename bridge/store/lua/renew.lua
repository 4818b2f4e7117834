--[[ renew: extends the leases `owner` still holds (a lock lives as long as its holder's lease).
KEYS[1] the queue (routes the call; includes/keys.lua)
ARGV[1] the key prefix (includes/keys.lua)  ARGV[2] owner  ARGV[3] lease ms  ARGV[4] now ms  ARGV[5..] job keys
Returns one 1 (renewed) or 0 (lost) per job key.
]]
--- @include "keys"
--- @include "members"
--- @include "records"

local owner, leaseMs, now = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local prefix = owner .. '|'
local out = {}
for i = 5, #ARGV do
  local key = ARGV[i]
  local held = readJob(rec(key), 'o')[1]
  local expires = tonumber(rcall('ZSCORE', K.leases, key) or '0')
  if held and string.sub(held, 1, #prefix) == prefix and expires > now then
    rcall('ZADD', K.leases, now + leaseMs, key)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
