--[[ admit-answered: a request answered from the cache, after admit answered `cached` (which
counted it against its device's quota). Idempotency record as in admit, then the reply is
recorded as the answer; nothing is queued.
KEYS[1] the job's record
ARGV[1] the key prefix (includes/keys.lua)  ARGV[2] reply JSON  ARGV[3] now ms
ARGV[4] ttl ms  ARGV[5] cutoff (Redis time, ms) or '', as in admit
Returns {'answered'} | {'duplicate_pending'} | {'duplicate_done', reply} | {'late'}
]]
--- @include "keys"
--- @include "records"
--- @include "admission"

if tooLate(ARGV[5]) then return {'late'} end
local now, ttlMs = tonumber(ARGV[3]), tonumber(ARGV[4])
local refused = seen(KEYS[1], now)
if refused then return refused end
recordReply(KEYS[1], ARGV[2], now, ttlMs)
return {'answered'}
