--[[ take-rate: one more upstream call's budget (a retry), unless the upstream is paused.
KEYS[1] calls  KEYS[2] call tokens  KEYS[3] seq  KEYS[4] pause
ARGV[1] tokens  ARGV[2] rpm  ARGV[3] tpm or ''  ARGV[4] now ms  ARGV[5] window ms
Returns {1, now} when taken, {0, retryAt} when not.
]]
local rcall = redis.call
--- @include "rate"

local now = tonumber(ARGV[4])
local pausedUntil = tonumber(rcall('GET', KEYS[4]) or '0')
if pausedUntil > now then return {0, tostring(pausedUntil)} end
local ok, at = takeRate(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), now, tonumber(ARGV[5]))
return {ok and 1 or 0, tostring(at)}
