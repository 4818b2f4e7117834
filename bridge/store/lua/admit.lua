--[[ admit: idempotency record + device quota + QUEUE_MAX + enqueue, as one step.
KEYS[1] idem:{jobKey}  hash state (pending|done), exp (ms), reply (JSON)
KEYS[2] dev:{deviceId} sorted set of this device's admissions (member seq, score time)
KEYS[3] queue    KEYS[4] jobs     KEYS[5] place    KEYS[6] deadlines
KEYS[7] depth    KEYS[8] seq     KEYS[9] cache:{cacheKey}, only for a job with a cache key
ARGV[1] job key  ARGV[2] job JSON  ARGV[3] score  ARGV[4] deadline ms or ''
ARGV[5] priority ARGV[6] lockId or '-'  ARGV[7] token estimate
ARGV[8] device requests per minute  ARGV[9] QUEUE_MAX  ARGV[10] now ms
ARGV[11] how long a pending record may live, ms (backstop only)
Returns {'queued'} | {'duplicate_pending'} | {'duplicate_done', reply} |
        {'rate_limited', retryAfterMs} | {'cached', answer JSON} | {'queue_full'}
A cached answer is checked here rather than before, so a miss (the common case) costs one
round trip; nothing is recorded for it (admit-answered does that).
]]
local rcall = redis.call
--- @include "members"
--- @include "queue"
--- @include "admission"
--- @include "cache"

local key, now = ARGV[1], tonumber(ARGV[10])
local windowMs = 60000
local refused = screen(KEYS[1], KEYS[2], tonumber(ARGV[8]), now, windowMs)
if refused then return refused end
if KEYS[9] then
  local answer = freshAnswer(KEYS[9], now)
  if answer then return {'cached', answer} end
end
local waiting = 0
for _, n in ipairs(rcall('HVALS', KEYS[7])) do waiting = waiting + tonumber(n) end
if waiting >= tonumber(ARGV[9]) then return {'queue_full'} end

local seq = rcall('INCR', KEYS[8])
countAdmission(KEYS[2], seq, now, windowMs)
-- An expired 'done' record would keep its old reply field beside the new state.
rcall('DEL', KEYS[1])
rcall('HSET', KEYS[1], 'state', 'pending')
rcall('PEXPIRE', KEYS[1], ARGV[11])
rcall('HSET', KEYS[4], key, ARGV[2])
local member = string.format('%016d', seq) .. '|' .. ARGV[5] .. '|' .. ARGV[6] .. '|' .. ARGV[7] .. '|' .. key
enqueue(KEYS[3], KEYS[5], KEYS[6], KEYS[7], ARGV[3], ARGV[4], member)
return {'queued'}
