--[[ settle: replaces a call's token estimate with the tokens the upstream reported, while
the call is still in the rolling window.
KEYS[1] calls  KEYS[2] call tokens
ARGV[1] call id (seq:estimate)  ARGV[2] reported tokens
]]
local rcall = redis.call
local score = rcall('ZSCORE', KEYS[1], ARGV[1])
if not score then return 0 end
local seq, estimate = string.match(ARGV[1], '^(%d+):(%d+)$')
rcall('ZREM', KEYS[1], ARGV[1])
rcall('ZADD', KEYS[1], score, seq .. ':' .. ARGV[2])
rcall('INCRBY', KEYS[2], tonumber(ARGV[2]) - tonumber(estimate))
return 1
