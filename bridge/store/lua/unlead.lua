--[[ unlead: the leader is done; only the leader may end its flight.
KEYS[1] flight:{cacheKey}  ARGV[1] job key
]]
local rcall = redis.call
local current = rcall('GET', KEYS[1])
if current and string.match(current, '^(.*)|%d+$') == ARGV[1] then rcall('DEL', KEYS[1]) end
return 1
