--[[ admit: idempotency record + device quota + QUEUE_MAX + enqueue, as one step; then, when
the instance asks, a claim (claim.lua's, for this instance) and the admitted job's first
coalescing step, so a request that finds the instance idle costs one round trip, not three.
When nothing else waits, the admitted job is claimed without passing through the queue.
KEYS[1] the job's record  KEYS[2] its device's quota
With ARGV[12] = '1' (the job has a cache key): KEYS[3] cache:{cacheKey}, which also holds its flight
With ARGV[22] ~= '' (a raw image): next, img:{sha256}, the image's base64
Then one spend key per budget charge (includes/spend.lua), closing KEYS
ARGV[1] the key prefix (includes/keys.lua)  ARGV[2] job key  ARGV[3] job JSON  ARGV[4] score
ARGV[5] deadline ms or ''  ARGV[6] priority  ARGV[7] lockId or '-'  ARGV[8] token estimate
ARGV[9] device requests per minute  ARGV[10] QUEUE_MAX  ARGV[11] now ms  ARGV[12] '1' when a cache key follows
ARGV[13] cutoff: Redis time (ms) after which the admission is refused unseen, or ''
ARGV[14] the job's fair-share cost (includes/fair.lua)
ARGV[15] claim owner, or '' for no claim; then ARGV[16] max jobs  ARGV[17] lease ms
ARGV[18] rpm  ARGV[19] tpm or ''
ARGV[20] QUEUE_MAX_BYTES or ''  ARGV[21] the job's stored size (its record and its image)
ARGV[22] the image's base64 or ''  ARGV[23] how long the image is kept (ms)
ARGV[24] how many budget charges; ARGV[25..] 5 per charge (includes/spend.lua)
The device's quota counts the publish first, whatever follows; a duplicate is answered from
its record; budgets are reserved last, only for a job that goes into the queue.
Returns {'queued'} | {'queued', claimed, expired, retryAt, lead kind, lead value} (with a
claim; claimed/expired/retryAt as claim.lua's; the lead is '', '' unless the admitted job was
claimed and has a cache key: 'leader', the leader's job key) | {'duplicate_pending'} |
{'duplicate_done', reply} | {'rate_limited', retryAfterMs} | {'cached', answer JSON} | {'queue_full'} | {'late'}
| {'budget_exceeded', position of the refusing charge, '1' when only reservations refused it}
A cached answer is checked here rather than before, so a miss (the common case) costs one
round trip; nothing is recorded for it (admit-answered does that).
]]
--- @include "keys"
--- @include "members"
--- @include "window"
--- @include "records"
--- @include "admission"
--- @include "fair"
--- @include "queue"
--- @include "cache"
--- @include "flight"
--- @include "claiming"
--- @include "spend"

local key, data, score, deadline = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local now, kRecord, kCache = tonumber(ARGV[11]), KEYS[1], ARGV[12] == '1' and KEYS[3]
if tooLate(ARGV[13]) then return {'late'} end
needNumbers(score, ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[21])
local owner, leaseMs = ARGV[15], tonumber(ARGV[17])
local rpm, tpm = tonumber(ARGV[18]), tonumber(ARGV[19])
local refused = screen(kRecord, KEYS[2], tonumber(ARGV[9]), now)
if refused then return refused end
local charges = tonumber(ARGV[24])
local firstCharge = #KEYS - charges + 1
local waiting = waitingJobs()

-- Nothing else waits, it names no lock, its deadline is ahead and the upstream has budget:
-- it is the head of the queue, so it is claimed without going into the queue and out again.
local budget
if owner ~= '' and waiting == 0 and ARGV[7] == '-' and (deadline == '' or tonumber(deadline) > now) then
  budget = openBudget(now, tpm)
  if tonumber(budget.extra or '0') > now or not tryWindow(budget, tonumber(ARGV[8]), rpm, tpm) then budget = nil end
end
local cacheValue, flying -- the cache key as read; flying: this job took the flight
if kCache then
  if budget then
    cacheValue = checkAndFly(kCache, key, leaseMs, now)
    flying = not cacheValue
  else
    cacheValue = rcall('GET', kCache)
  end
  local answer = answerIn(cacheValue, now)
  if answer then return {'cached', answer} end -- counted against the quota, nothing written
end
local full = waiting >= tonumber(ARGV[10])
-- Its size counts toward QUEUE_MAX_BYTES from here, given back if it is refused: the common
-- case costs one command (none in a `many` call, call.lua).
local size, counted = tonumber(ARGV[21]), not full
local total = counted and countQueueBytes(K.qbytes, size, ARGV[20] ~= '')
if total and total > tonumber(ARGV[20]) then full = true end
local refusing, inFlight = 0, false
if not full then refusing, inFlight = spendRefusal(KEYS, ARGV, firstCharge, 25, charges) end
if full or refusing > 0 then
  if counted then countQueueBytes(K.qbytes, -size) end
  if flying then endFlight(kCache, key) end
  if full then return {'queue_full'} end
  return {'budget_exceeded', refusing, inFlight and '1' or '0'}
end
reserveSpend(KEYS, ARGV, firstCharge, 25, charges)
if ARGV[22] ~= '' then keepImage(KEYS[kCache and 4 or 3], kRecord, ARGV[22], ARGV[23]) end

-- seq orders jobs of equal score by admission. A job claimed at once never waits in the
-- queue by its member (a reaped one goes back ahead of its equals), so it needs none.
local function member(seq)
  return string.format('%016d', seq) .. '|' .. ARGV[6] .. '|' .. ARGV[7] .. '|' .. ARGV[8] .. '|' .. key
end
local claimed, expired, retryAt, keys
if budget then
  writeJob(kRecord, 'j', data, 't', deadline, 'b', ARGV[21], 'o', packOwner(owner, '', score, deadline, member(0)))
  rcall('ZADD', K.leases, now + leaseMs, key)
  claimed, expired, retryAt, keys = {data, '0', '', closeWindow(budget)[1], ''}, {}, '', {key}
else
  writeJob(kRecord, 'j', data, 't', deadline, 'b', ARGV[21], 'c', ARGV[14])
  enqueue(score, deadline, member(rcall('INCR', K.seq)))
  if owner == '' then return {'queued'} end
  claimed, expired, retryAt, keys = claimJobs(owner, tonumber(ARGV[16]), leaseMs, rpm, tpm, now)
end
local leadKind, leadValue = '', ''
if kCache then
  for _, k in ipairs(keys) do
    if k == key then
      -- No cached answer (checked above): only the flight is left to take.
      leadKind, leadValue = 'leader', flying and key or takeFlight(kCache, key, leaseMs, now, cacheValue)
      break
    end
  end
end
return {'queued', claimed, expired, retryAt, leadKind, leadValue}
