--[[ scada-keep: a device-template's last good answer. Bounded in entries (the least recently
answered go first) and in age (an entry not renewed for the TTL is ignored by readers and
dropped here; both keys expire when nothing is kept for the TTL). The record's size is
checked by the caller before it comes here.
KEYS[1] scada:good (zset: field → kept at, ms)  KEYS[2] scada:records (hash: field → record JSON)
ARGV[1] field (deviceId/template)  ARGV[2] record JSON  ARGV[3] now ms  ARGV[4] TTL ms  ARGV[5] max entries
]]
local index, records = KEYS[1], KEYS[2]
local now, ttl, max = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
-- Chunks keep unpack under Lua's argument limit however many entries go at once.
local CHUNK = 1000

rcall('ZADD', index, now, ARGV[1])
rcall('HSET', records, ARGV[1], ARGV[2])

local stale = rcall('ZRANGEBYSCORE', index, '-inf', now - ttl, 'LIMIT', 0, CHUNK)
if #stale > 0 then
  rcall('HDEL', records, unpack(stale))
  rcall('ZREM', index, unpack(stale))
end

local over = rcall('ZCARD', index) - max
while over > 0 do
  local n = math.min(over, CHUNK)
  local oldest = rcall('ZRANGE', index, 0, n - 1)
  rcall('HDEL', records, unpack(oldest))
  rcall('ZREMRANGEBYRANK', index, 0, n - 1)
  over = over - n
end

rcall('PEXPIRE', index, ttl)
rcall('PEXPIRE', records, ttl)
return 1
