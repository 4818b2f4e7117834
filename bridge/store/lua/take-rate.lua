--[[ take-rate: one more upstream call's budget (a retry), unless the upstream is paused.
KEYS[1] calls  KEYS[2] call tokens  KEYS[3] seq  KEYS[4] pause
ARGV[1] tokens  ARGV[2] rpm  ARGV[3] tpm or ''  ARGV[4] now ms  ARGV[5] window ms
Returns {1, callId} when taken, {0, retryAt} when not.
]]
local rcall = redis.call
--- @include "rate"

local tokens, rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local now, windowMs = tonumber(ARGV[4]), tonumber(ARGV[5])
local pausedUntil = tonumber(rcall('GET', KEYS[4]) or '0')
if pausedUntil > now then return {0, tostring(pausedUntil)} end
local budget = openBudget(KEYS[1], KEYS[2], now, windowMs)
if tryBudget(budget, tokens, rpm, tpm) then
  return {1, closeBudget(budget, KEYS[1], KEYS[2], KEYS[3], now, windowMs)[1]}
end
return {0, tostring(budgetFreeAt(budget, KEYS[1], tokens, rpm, tpm, now, windowMs))}
