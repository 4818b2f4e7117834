--[[ renew: extends the leases `owner` still holds (a lock lives as long as its holder's lease).
KEYS[1] leases  KEYS[2] owners
ARGV[1] owner  ARGV[2] lease ms  ARGV[3] now ms  ARGV[4..] job keys
Returns one 1 (renewed) or 0 (lost) per job key.
]]
local rcall = redis.call
local owner, leaseMs, now = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local prefix = owner .. '|'
local out = {}
for i = 4, #ARGV do
  local key = ARGV[i]
  local held = rcall('HGET', KEYS[2], key)
  local expires = tonumber(rcall('ZSCORE', KEYS[1], key) or '0')
  if held and string.sub(held, 1, #prefix) == prefix and expires > now then
    rcall('ZADD', KEYS[1], now + leaseMs, key)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
