--[[ pause: a 429 pauses dispatch to the upstream for every instance; never shortens a pause.
KEYS[1] pause  ARGV[1] until ms  ARGV[2] now ms (only for the key's backstop expiry)
]]
local rcall = redis.call
local untilMs, now = tonumber(ARGV[1]), tonumber(ARGV[2])
if untilMs > tonumber(rcall('GET', KEYS[1]) or '0') then
  rcall('SET', KEYS[1], ARGV[1], 'PX', math.max(untilMs - now, 0) + 60000)
end
return 1
