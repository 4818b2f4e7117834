-- The job record, which is also the request's idempotency record, at rec(job key) (keys.lua).
-- While the job lives it is a hash:
--   j  the job JSON               t  its deadline (ms) or ''
--   a  attempts spent by holders whose lease ran out
--   o  owner|fence|score|deadline|queue member while a holder has it, else ''
--   w  'q' queue member | 'p' parked member while it waits, else ''
--   r  the reply its holder recorded before publishing (record.lua)
--   x, y  the expiry and reply of an answer given while another holder had it (complete.lua)
-- The answer replaces the hash with one string, 'd<expiry ms>|<reply JSON>', so forgetting
-- the job costs nothing more. A record written by 0.6.1 may be the string 'p' (pending);
-- one written by 0.6.0 is a hash with state, exp and reply.

-- Returns state ('pending' | 'done' | nil), expiry, reply.
local function readRecord(kRecord)
  local value = redis.pcall('GET', kRecord)
  if type(value) == 'table' and value.err then
    local v = rcall('HMGET', kRecord, 'state', 'exp', 'reply', 'x', 'y')
    if v[1] then return v[1], tonumber(v[2]), v[3] end
    if v[4] then return 'done', tonumber(v[4]), v[5] end
    return 'pending'
  end
  if not value then return nil end
  if value == 'p' then return 'pending' end
  local bar = string.find(value, '|', 1, true)
  return 'done', tonumber(string.sub(value, 2, bar - 1)), string.sub(value, bar + 1)
end

-- A job record's fields, read as a hash: {} when the record is not one (answered, or gone).
local function readJob(kRecord, ...)
  local v = redis.pcall('HMGET', kRecord, ...)
  if type(v) == 'table' and v.err then return {} end
  return v
end

-- Writes a new job record; `backstopMs` bounds a record a lost job would leave.
local function writeJob(kRecord, backstopMs, ...)
  rcall('HSET', kRecord, ...)
  rcall('PEXPIRE', kRecord, backstopMs)
end

-- Remembers the request's answer for the idempotency window (replacing the record).
local function recordReply(kRecord, reply, now, ttlMs)
  rcall('SET', kRecord, 'd' .. tostring(now + ttlMs) .. '|' .. reply, 'PX', ttlMs)
end
