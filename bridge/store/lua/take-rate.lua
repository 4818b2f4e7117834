--[[ take-rate: one more upstream call's budget (a retry), unless the upstream is paused.
KEYS[1] the queue (routes the call; includes/keys.lua)
ARGV[1] the key prefix (includes/keys.lua)  ARGV[2] tokens  ARGV[3] rpm  ARGV[4] tpm or ''  ARGV[5] now ms
Returns {1, callId} when taken, {0, retryAt} when not.
]]
--- @include "keys"
--- @include "window"
--- @include "claiming"

local tokens, rpm, tpm, now = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local budget = openBudget(now, tpm)
local pausedUntil = tonumber(budget.extra or '0')
if pausedUntil > now then return {0, tostring(pausedUntil)} end
if tryWindow(budget, tokens, rpm, tpm) then return {1, closeWindow(budget)[1]} end
return {0, tostring(windowFreeAt(budget, tokens, rpm, tpm, now))}
