--[[ dlq-stats: how many dead letters are kept and their size, after dropping (up to 1000 at a
time) those past DLQ_TTL_S: every instance's dashboard tick asks, so aged entries go even while
no new ones arrive.
KEYS[1] the index (K['dlq:index'])
ARGV[1] the key prefix (includes/keys.lua)  ARGV[2] the oldest time kept (13 digits)
Returns {count, bytes}.
]]
--- @include "keys"
--- @include "dead-letters"

dlqExpire(ARGV[2], 1000)
return {rcall('ZLEXCOUNT', dlqIndex(), '[' .. ARGV[2], '+'), tonumber(rcall('GET', K['dlq:bytes']) or '0')}
