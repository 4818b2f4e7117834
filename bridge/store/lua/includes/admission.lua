-- The idempotency record and the device's quota, checked the same way by every admission.
-- Needs records and window.

-- An admission Redis receives after its cutoff (Redis time, ms; '' for none) is refused
-- unseen: the bridge gave up waiting for it and answered `unavailable` (redis-health.ts).
local function tooLate(cutoff)
  if cutoff == '' then return false end
  return redisTimeMs() > tonumber(cutoff)
end

-- Numbers an admission orders or counts by are checked before anything is written: a bad
-- one fails that admission alone, whole (a batch's others go on, lua-library.ts `many`).
local function needNumbers(...)
  for i = 1, select('#', ...) do
    local n = tonumber((select(i, ...)))
    if not n or n ~= n or n == math.huge or n == -math.huge then error('admission argument ' .. i .. ' is not a finite number') end
  end
end

-- The device's publishes: a rolling window counted per bucket (window.lua).
local QUOTA_WINDOW_MS = 60000

-- The idempotency record's answer to a repeat: {'duplicate_pending'}, {'duplicate_done', reply},
-- or nil when the key is free (an answer whose expiry passed is deleted).
local function seen(kRecord, now)
  local state, exp, reply = readRecord(kRecord)
  if state == 'pending' then
    -- Its holder recorded the reply and is publishing it (record, publish, complete): a repeat
    -- arriving before the completion gets that reply, or it would get none.
    local recorded = readJob(kRecord, 'r')[1]
    if recorded then return {'duplicate_done', recorded} end
    return {'duplicate_pending'}
  end
  if state == 'done' then
    if exp > now then return {'duplicate_done', reply} end
    rcall('DEL', kRecord) -- its expiry passed: the key is free for a new job record
  end
  return nil
end

-- Counts one publish of the device, whatever becomes of it (a duplicate, a refusal, a cache
-- hit): nil, or the script's answer when the device is over its quota (that publish is not
-- counted, so a device that keeps sending is served again as its oldest publishes leave).
local function chargeQuota(kQuota, rpm, now)
  local quota = openWindow(kQuota, now, QUOTA_WINDOW_MS, false)
  if not tryWindow(quota, 0, rpm) then
    return {'rate_limited', tostring(windowFreeAt(quota, 0, rpm, nil, now) - now)}
  end
  closeWindow(quota)
  return nil
end

-- The device's quota first, then the idempotency record: returns the script's answer when
-- the request must not be admitted (a duplicate is answered from its record), else nil.
local function screen(kRecord, kQuota, rpm, now)
  local refused = chargeQuota(kQuota, rpm, now)
  if refused then return refused end
  return seen(kRecord, now)
end
