--[[ replay: dead letters back into the queue as new arrivals (fresh attempts, no ttl).
KEYS[1] dlq  KEYS[2] queue  KEYS[3] jobs  KEYS[4] attempts  KEYS[5] place  KEYS[6] deadlines
KEYS[7] depth  KEYS[8] seq  KEYS[9..] idem:{jobKey}, one per entry, in ARGV order
ARGV[1] pending-record backstop ms; then per entry, 7 values:
  raw dead-letter entry, job key, job JSON, score, priority, lockId or '-', token estimate
Returns how many entries were replayed (an entry already gone from the list is skipped).
]]
local rcall = redis.call
--- @include "members"
--- @include "queue"
--- @include "admission"

local replayed = 0
for i = 0, (#ARGV - 1) / 7 - 1 do
  local a = 2 + i * 7
  if rcall('LREM', KEYS[1], 1, ARGV[a]) > 0 then
    local idem = KEYS[9 + i]
    local key = ARGV[a + 1]
    markPending(idem, ARGV[1])
    rcall('HSET', KEYS[3], key, ARGV[a + 2])
    rcall('HDEL', KEYS[4], key)
    local seq = rcall('INCR', KEYS[8])
    local member = string.format('%016d', seq) .. '|' .. ARGV[a + 4] .. '|' .. ARGV[a + 5] .. '|' .. ARGV[a + 6] .. '|' .. key
    enqueue(KEYS[2], KEYS[5], KEYS[6], KEYS[7], ARGV[a + 3], '', member)
    replayed = replayed + 1
  end
end
return replayed
