-- The idempotency record and the device's quota, checked the same way by every admission.
-- Needs records and window.

-- An admission Redis receives after its cutoff (Redis time, ms; '' for none) is refused
-- unseen: the bridge gave up waiting for it and answered `unavailable` (redis-health.ts).
local function tooLate(cutoff)
  if cutoff == '' then return false end
  local t = rcall('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > tonumber(cutoff)
end

-- The device's admissions: a rolling window counted per bucket (window.lua).
local QUOTA_WINDOW_MS = 60000

-- Returns the script's answer when the request must not be admitted, else nil and the
-- device's open window (closed by closeWindow once the request is in).
local function screen(kRecord, kQuota, rpm, now)
  local state, exp, reply = readRecord(kRecord)
  if state == 'pending' then return {'duplicate_pending'} end
  if state == 'done' then
    if exp > now then return {'duplicate_done', reply} end
    rcall('DEL', kRecord) -- its expiry passed: the key is free for a new job record
  end
  local quota = openWindow(kQuota, now, QUOTA_WINDOW_MS, false)
  if not tryWindow(quota, 0, rpm) then
    return {'rate_limited', tostring(windowFreeAt(quota, 0, rpm, nil, now) - now)}
  end
  return nil, quota
end
