--[[ pause: a 429 pauses dispatch to the upstream for every instance; never shortens a pause.
The pause is a field of the budget's hash, which then lives at least as long as the pause.
KEYS[1] the queue (routes the call; includes/keys.lua)
ARGV[1] the key prefix (includes/keys.lua)  ARGV[2] until ms  ARGV[3] now ms
]]
--- @include "keys"
--- @include "window"

leaveSharedWindow() -- it writes the budget's hash itself

local untilMs, now = tonumber(ARGV[2]), tonumber(ARGV[3])
if untilMs > tonumber(rcall('HGET', K.budget, 'pause') or '0') then
  rcall('HSET', K.budget, 'pause', ARGV[2])
  local keep = math.max(untilMs - now, 0) + 60000
  if rcall('PTTL', K.budget) < keep then rcall('PEXPIRE', K.budget, keep) end
end
return 1
