--[[ admit-answered: a request answered from the cache. Idempotency record and device quota
as in admit, then the reply is recorded as the answer; nothing is queued.
KEYS[1] idem:{jobKey}  KEYS[2] dev:{deviceId}  KEYS[3] seq
ARGV[1] reply JSON  ARGV[2] device requests per minute  ARGV[3] now ms  ARGV[4] ttl ms
Returns {'answered'} | {'duplicate_pending'} | {'duplicate_done', reply} | {'rate_limited', retryAfterMs}
]]
local rcall = redis.call
--- @include "quota"

local now, ttlMs = tonumber(ARGV[3]), tonumber(ARGV[4])
local state = rcall('HMGET', KEYS[1], 'state', 'exp', 'reply')
if state[1] == 'pending' then return {'duplicate_pending'} end
if state[1] == 'done' and tonumber(state[2]) > now then return {'duplicate_done', state[3]} end

local windowMs = 60000
local wait = quotaWait(KEYS[2], tonumber(ARGV[2]), now, windowMs)
if wait then return {'rate_limited', tostring(wait)} end
countAdmission(KEYS[2], rcall('INCR', KEYS[3]), now, windowMs)
rcall('HSET', KEYS[1], 'state', 'done', 'exp', tostring(now + ttlMs), 'reply', ARGV[1])
rcall('PEXPIRE', KEYS[1], ttlMs)
return {'answered'}
