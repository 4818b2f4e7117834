-- A device's admissions in the last minute: a sorted set (member seq, score time).

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
