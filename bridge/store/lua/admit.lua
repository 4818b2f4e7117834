--[[ admit: idempotency record + device quota + QUEUE_MAX + enqueue, as one step; then, when
the instance asks, a claim (claim.lua's, for this instance) and the admitted job's first
coalescing step, so a request that finds the instance idle costs one round trip, not three.
When nothing else waits, the admitted job is claimed without passing through the queue.
KEYS[1] idem:{jobKey}  the idempotency record (includes/admission.lua)
KEYS[2] dev:{deviceId} sorted set of this device's admissions (member seq, score time)
KEYS[3] queue    KEYS[4] jobs     KEYS[5] place    KEYS[6] deadlines
KEYS[7] depth    KEYS[8] seq
With ARGV[12] = '1' (the job has a cache key): KEYS[9] cache:{cacheKey}  KEYS[10] its flight (the same key)
With a claim, the next ten: parked, attempts, leases, owners, locks, fences, calls,
call tokens, pause, recorded.
ARGV[1] job key  ARGV[2] job JSON  ARGV[3] score  ARGV[4] deadline ms or ''
ARGV[5] priority ARGV[6] lockId or '-'  ARGV[7] token estimate
ARGV[8] device requests per minute  ARGV[9] QUEUE_MAX  ARGV[10] now ms
ARGV[11] how long a pending record may live, ms (backstop only)
ARGV[12] '1' when cache keys follow
ARGV[13] claim owner, or '' for no claim; then ARGV[14] max jobs  ARGV[15] lease ms
ARGV[16] rpm  ARGV[17] tpm or ''  ARGV[18] rate window ms
Returns {'queued'} | {'queued', claimed, expired, retryAt, lead kind, lead value} (with a
claim; claimed/expired/retryAt as claim.lua's; the lead is '', '' unless the admitted job was
claimed and has a cache key: 'leader', the leader's job key) | {'duplicate_pending'} |
{'duplicate_done', reply} | {'rate_limited', retryAfterMs} | {'cached', answer JSON} | {'queue_full'}
A cached answer is checked here rather than before, so a miss (the common case) costs one
round trip; nothing is recorded for it (admit-answered does that).
]]
local rcall = redis.call
--- @include "members"
--- @include "queue"
--- @include "admission"
--- @include "cache"
--- @include "flight"
--- @include "rate"
--- @include "claiming"

local key, now = ARGV[1], tonumber(ARGV[10])
local windowMs = 60000
local cached = ARGV[12] == '1'
local cacheValue -- the cache key as read: nothing in this script writes it before takeFlight
local refused = screen(KEYS[1], KEYS[2], tonumber(ARGV[8]), now, windowMs)
if refused then return refused end
if cached then
  local answer
  answer, cacheValue = freshAnswer(KEYS[9], now)
  if answer then return {'cached', answer} end
end
local waiting = 0
for _, n in ipairs(rcall('HVALS', KEYS[7])) do waiting = waiting + tonumber(n) end
if waiting >= tonumber(ARGV[9]) then return {'queue_full'} end

local seq = rcall('INCR', KEYS[8])
countAdmission(KEYS[2], seq, now, windowMs)
markPending(KEYS[1], ARGV[11])
rcall('HSET', KEYS[4], key, ARGV[2])
local member = string.format('%016d', seq) .. '|' .. ARGV[5] .. '|' .. ARGV[6] .. '|' .. ARGV[7] .. '|' .. key
if ARGV[13] == '' then
  enqueue(KEYS[3], KEYS[5], KEYS[6], KEYS[7], ARGV[3], ARGV[4], member)
  return {'queued'}
end

local c = cached and 11 or 9
local K = {
  queue = KEYS[3], parked = KEYS[c], jobs = KEYS[4], attempts = KEYS[c + 1], place = KEYS[5],
  deadlines = KEYS[6], depth = KEYS[7], leases = KEYS[c + 2], owners = KEYS[c + 3], locks = KEYS[c + 4],
  fences = KEYS[c + 5], calls = KEYS[c + 6], callTokens = KEYS[c + 7], pause = KEYS[c + 8], seq = KEYS[8],
  recorded = KEYS[c + 9],
}
local leaseMs = tonumber(ARGV[15])
local rpm, tpm, rateWindowMs = tonumber(ARGV[16]), tonumber(ARGV[17]), tonumber(ARGV[18])
local claimed, expired, retryAt, keys
if waiting == 0 and ARGV[6] == '-' and (ARGV[4] == '' or tonumber(ARGV[4]) > now) then
  local job = { key = key, data = ARGV[2], score = ARGV[3], deadline = ARGV[4], member = member, tokens = tonumber(ARGV[7]), seq = seq }
  claimed, expired, retryAt, keys = claimAdmitted(K, ARGV[13], leaseMs, rpm, tpm, now, rateWindowMs, job)
end
if not claimed then
  enqueue(KEYS[3], KEYS[5], KEYS[6], KEYS[7], ARGV[3], ARGV[4], member)
  claimed, expired, retryAt, keys = claimJobs(K, ARGV[13], tonumber(ARGV[14]), leaseMs, rpm, tpm, now, rateWindowMs)
end
local leadKind, leadValue = '', ''
if cached then
  for _, k in ipairs(keys) do
    if k == key then
      -- No cached answer (checked above): only the flight is left to take.
      leadKind, leadValue = 'leader', takeFlight(KEYS[10], key, leaseMs, now, cacheValue)
      break
    end
  end
end
return {'queued', claimed, expired, retryAt, leadKind, leadValue}
