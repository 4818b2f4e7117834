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

-- The idempotency record (hash: state pending|done, exp, reply) and the device's quota,
-- checked the same way by every admission. Returns the script's answer when the request
-- must not be admitted, else nil.
local function screen(kIdem, kDevice, rpm, now, windowMs)
  local state = rcall('HMGET', kIdem, 'state', 'exp', 'reply')
  if state[1] == 'pending' then return {'duplicate_pending'} end
  if state[1] == 'done' and tonumber(state[2]) > now then return {'duplicate_done', state[3]} end
  local wait = quotaWait(kDevice, rpm, now, windowMs)
  if wait then return {'rate_limited', tostring(wait)} end
  return nil
end

-- Remembers the request's answer for the idempotency window (overwriting every field).
local function recordReply(kIdem, reply, now, ttlMs)
  rcall('HSET', kIdem, 'state', 'done', 'exp', tostring(now + ttlMs), 'reply', reply)
  rcall('PEXPIRE', kIdem, ttlMs)
end
