--[[ scada-all: the kept last good answers younger than the TTL, most recently answered first.
KEYS[1] scada:good  KEYS[2] scada:records
ARGV[1] now ms  ARGV[2] TTL ms  ARGV[3] limit
Returns the records' JSON (nil for one gone meanwhile), in that order.
]]
local CHUNK = 1000
local fields = rcall('ZREVRANGEBYSCORE', KEYS[1], '+inf', '(' .. (tonumber(ARGV[1]) - tonumber(ARGV[2])), 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for i = 1, #fields, CHUNK do
  local values = rcall('HMGET', KEYS[2], unpack(fields, i, math.min(i + CHUNK - 1, #fields)))
  for _, v in ipairs(values) do out[#out + 1] = v end
end
return out
