-- Admission checks shared by admit and admit-answered: the device's admissions in the last
-- minute are a sorted set (member seq, score time).

-- Returns the ms until the device may submit again, or nil when it is under `rpm`.
local function quotaWait(kDevice, rpm, now, windowMs)
  rcall('ZREMRANGEBYSCORE', kDevice, '-inf', now - windowMs)
  local used = rcall('ZCARD', kDevice)
  if used < rpm then return nil end
  local oldest = rcall('ZRANGE', kDevice, used - rpm, used - rpm, 'WITHSCORES')
  return tonumber(oldest[2]) + windowMs - now
end

local function countAdmission(kDevice, seq, now, windowMs)
  rcall('ZADD', kDevice, now, seq)
  rcall('PEXPIRE', kDevice, windowMs * 2)
end

-- The idempotency record is one string: 'p' while the request is pending, 'd<exp ms>|<reply
-- JSON>' once it is done. A record written by an older version is a hash (state, exp, reply)
-- and is read as such until it expires. Returns state ('pending' | 'done' | nil), exp, reply.
local function readRecord(kIdem)
  local value = redis.pcall('GET', kIdem)
  if type(value) == 'table' and value.err then
    local old = rcall('HMGET', kIdem, 'state', 'exp', 'reply')
    return old[1], tonumber(old[2]), old[3]
  end
  if not value then return nil end
  if value == 'p' then return 'pending' end
  local bar = string.find(value, '|', 1, true)
  return 'done', tonumber(string.sub(value, 2, bar - 1)), string.sub(value, bar + 1)
end

-- The request is admitted and not answered yet; `backstopMs` bounds a record a lost job leaves.
local function markPending(kIdem, backstopMs)
  rcall('SET', kIdem, 'p', 'PX', backstopMs)
end

-- The idempotency record and the device's quota, checked the same way by every admission.
-- Returns the script's answer when the request must not be admitted, else nil.
local function screen(kIdem, kDevice, rpm, now, windowMs)
  local state, exp, reply = readRecord(kIdem)
  if state == 'pending' then return {'duplicate_pending'} end
  if state == 'done' and exp > now then return {'duplicate_done', reply} end
  local wait = quotaWait(kDevice, rpm, now, windowMs)
  if wait then return {'rate_limited', tostring(wait)} end
  return nil
end

-- Remembers the request's answer for the idempotency window (replacing the record).
local function recordReply(kIdem, reply, now, ttlMs)
  rcall('SET', kIdem, 'd' .. tostring(now + ttlMs) .. '|' .. reply, 'PX', ttlMs)
end
