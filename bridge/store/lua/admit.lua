--[[ admit: idempotency record + device quota + QUEUE_MAX + enqueue, as one step; then, when
the instance asks, a claim (claim.lua's, for this instance) and the admitted job's first
coalescing step, so a request that finds the instance idle costs one round trip, not three.
When nothing else waits, the admitted job is claimed without passing through the queue.
KEYS[1..10] the fixed keys (includes/keys.lua)  KEYS[11] the job's record  KEYS[12] its device's quota
With ARGV[13] = '1' (the job has a cache key): KEYS[13] cache:{cacheKey}, which also holds its flight
ARGV[1] records' key base  ARGV[2] job key  ARGV[3] job JSON  ARGV[4] score
ARGV[5] deadline ms or ''  ARGV[6] priority  ARGV[7] lockId or '-'  ARGV[8] token estimate
ARGV[9] device requests per minute  ARGV[10] QUEUE_MAX  ARGV[11] now ms
ARGV[12] how long a pending record may live, ms (backstop only)  ARGV[13] '1' when a cache key follows
ARGV[14] claim owner, or '' for no claim; then ARGV[15] max jobs  ARGV[16] lease ms
ARGV[17] rpm  ARGV[18] tpm or ''
Returns {'queued'} | {'queued', claimed, expired, retryAt, lead kind, lead value} (with a
claim; claimed/expired/retryAt as claim.lua's; the lead is '', '' unless the admitted job was
claimed and has a cache key: 'leader', the leader's job key) | {'duplicate_pending'} |
{'duplicate_done', reply} | {'rate_limited', retryAfterMs} | {'cached', answer JSON} | {'queue_full'}
A cached answer is checked here rather than before, so a miss (the common case) costs one
round trip; nothing is recorded for it (admit-answered does that).
]]
local rcall = redis.call
--- @include "keys"
--- @include "members"
--- @include "window"
--- @include "records"
--- @include "admission"
--- @include "queue"
--- @include "cache"
--- @include "flight"
--- @include "claiming"

local key, data, score, deadline = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local now, backstopMs = tonumber(ARGV[11]), ARGV[12]
local kRecord, cached = KEYS[11], ARGV[13] == '1'
local cacheValue -- the cache key as read: nothing in this script writes it before takeFlight
local refused, quota = screen(kRecord, KEYS[12], tonumber(ARGV[9]), now)
if refused then return refused end
if cached then
  local answer
  answer, cacheValue = freshAnswer(KEYS[13], now)
  if answer then return {'cached', answer} end
end
local waiting = 0
for _, n in ipairs(rcall('HVALS', K.depth)) do waiting = waiting + tonumber(n) end
if waiting >= tonumber(ARGV[10]) then return {'queue_full'} end

closeWindow(quota)
-- seq orders jobs of equal score by admission; one claimed at once never waits in the queue
-- by this member (a reaped one goes back ahead of its equals), so it needs no seq.
local function member(seq)
  return string.format('%016d', seq) .. '|' .. ARGV[6] .. '|' .. ARGV[7] .. '|' .. ARGV[8] .. '|' .. key
end
local function queueIt()
  writeJob(kRecord, backstopMs, 'j', data, 't', deadline)
  enqueue(score, deadline, member(rcall('INCR', K.seq)))
end
local owner = ARGV[14]
if owner == '' then
  queueIt()
  return {'queued'}
end

local leaseMs, rpm, tpm = tonumber(ARGV[16]), tonumber(ARGV[17]), tonumber(ARGV[18])
local claimed, expired, retryAt, keys
-- Nothing else waits, it names no lock and its deadline is ahead: it is the head of the
-- queue, so it is claimed without first going into the queue and out again.
if waiting == 0 and ARGV[7] == '-' and (deadline == '' or tonumber(deadline) > now) then
  local budget = openBudget(now, tpm)
  if tonumber(budget.extra or '0') <= now and tryWindow(budget, tonumber(ARGV[8]), rpm, tpm) then
    writeJob(kRecord, backstopMs, 'j', data, 't', deadline, 'o', packOwner(owner, '', score, deadline, member(0)))
    rcall('ZADD', K.leases, now + leaseMs, key)
    claimed, expired, retryAt, keys = {data, '0', '', closeWindow(budget)[1], ''}, {}, '', {key}
  end
end
if not claimed then
  queueIt()
  claimed, expired, retryAt, keys = claimJobs(owner, tonumber(ARGV[15]), leaseMs, rpm, tpm, now)
end
local leadKind, leadValue = '', ''
if cached then
  for _, k in ipairs(keys) do
    if k == key then
      -- No cached answer (checked above): only the flight is left to take.
      leadKind, leadValue = 'leader', takeFlight(KEYS[13], key, leaseMs, now, cacheValue)
      break
    end
  end
end
return {'queued', claimed, expired, retryAt, leadKind, leadValue}
