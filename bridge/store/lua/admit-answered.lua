--[[ admit-answered: a request answered from the cache. Idempotency record and device quota
as in admit, then the reply is recorded as the answer; nothing is queued.
KEYS[1] the job's record  KEYS[2] its device's quota
ARGV[1] the key prefix (includes/keys.lua)  ARGV[2] reply JSON  ARGV[3] device requests per minute  ARGV[4] now ms
ARGV[5] ttl ms  ARGV[6] cutoff (Redis time, ms) or '', as in admit
Returns {'answered'} | {'duplicate_pending'} | {'duplicate_done', reply} | {'rate_limited', retryAfterMs} | {'late'}
]]
--- @include "keys"
--- @include "window"
--- @include "records"
--- @include "admission"

if tooLate(ARGV[6]) then return {'late'} end
local now, ttlMs = tonumber(ARGV[4]), tonumber(ARGV[5])
local refused, quota = screen(KEYS[1], KEYS[2], tonumber(ARGV[3]), now)
if refused then return refused end
closeWindow(quota)
recordReply(KEYS[1], ARGV[2], now, ttlMs)
return {'answered'}
