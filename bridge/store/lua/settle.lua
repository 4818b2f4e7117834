--[[ settle: replaces a call's token estimate with the tokens the upstream reported (0 for a
call refused before it generated anything), while its bucket is still in the rolling window
(includes/window.lua).
KEYS[1] the queue (routes the call; includes/keys.lua)
ARGV[1] the key prefix (includes/keys.lua)  ARGV[2] call id (bucket:estimate)  ARGV[3] reported tokens
]]
--- @include "keys"
--- @include "window"

leaveSharedWindow() -- it writes the budget's hash itself

local bucket, estimate = string.match(ARGV[2], '^(-?%d+):(%d+)$')
if not bucket or rcall('HEXISTS', K.budget, 't' .. bucket) == 0 then return 0 end
local delta = digits(tonumber(ARGV[3]) - tonumber(estimate))
rcall('HINCRBY', K.budget, 't' .. bucket, delta)
rcall('HINCRBY', K.budget, 'w', delta)
return 1
