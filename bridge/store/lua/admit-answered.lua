--[[ admit-answered: a request answered from the cache. Idempotency record and device quota
as in admit, then the reply is recorded as the answer; nothing is queued.
KEYS[1] idem:{jobKey}  KEYS[2] dev:{deviceId}  KEYS[3] seq
ARGV[1] reply JSON  ARGV[2] device requests per minute  ARGV[3] now ms  ARGV[4] ttl ms
Returns {'answered'} | {'duplicate_pending'} | {'duplicate_done', reply} | {'rate_limited', retryAfterMs}
]]
local rcall = redis.call
--- @include "admission"

local now, ttlMs = tonumber(ARGV[3]), tonumber(ARGV[4])
local windowMs = 60000
local refused = screen(KEYS[1], KEYS[2], tonumber(ARGV[2]), now, windowMs)
if refused then return refused end
countAdmission(KEYS[2], rcall('INCR', KEYS[3]), now, windowMs)
recordReply(KEYS[1], ARGV[1], now, ttlMs)
return {'answered'}
