-- The job record, which is also the request's idempotency record, at rec(job key) (keys.lua).
-- While the job lives it is a hash:
--   j  the job JSON               t  its deadline (ms) or ''
--   a  attempts spent by holders whose lease ran out
--   o  owner|fence|score|deadline|queue member while a holder has it, else ''
--   w  'q' queue member | 'p' parked member while it waits, else ''
--   c  its fair-share cost, charged to its device when it is claimed (fair.lua)
--   r  the reply its holder recorded before publishing (record.lua)
--   b  its stored size, counted in K.qbytes (QUEUE_MAX_BYTES) until the record stops counting
--   i  the key of the raw image it holds (img:{sha256}, queue.lua) until then
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

-- Writes a new job record. It lives as long as its job waits or is held; a job handed to
-- an instance to answer without a lease (expired, out of attempts) gets letGo.
local function writeJob(kRecord, ...)
  rcall('HSET', kRecord, ...)
end

-- How long the record of a job handed out without a lease may stay, should its answerer die
-- before completing it: long past any retry, so a repeat is still recognised meanwhile.
local UNHELD_TTL_MS = 7 * 24 * 3600 * 1000

-- The record stops counting toward QUEUE_MAX_BYTES (answered, drained, or handed out for its
-- last reply, which may never come), and stops holding its image (queue.lua keepImage): once,
-- since its fields go with it.
-- `bytes`, `image`: its fields b and i as read; `replaced`: the record is replaced next, and
-- the fields go with it.
local function dropBytes(kRecord, bytes, image, replaced)
  if bytes then countQueueBytes(K.qbytes, -tonumber(bytes)) end
  if image and rcall('HINCRBY', image, 'n', -1) <= 0 then rcall('DEL', image) end
  if (bytes or image) and not replaced then rcall('HDEL', kRecord, 'b', 'i') end
end

local function forgetBytes(kRecord)
  local v = readJob(kRecord, 'b', 'i')
  dropBytes(kRecord, v[1], v[2], false)
end

local function letGo(kRecord)
  rcall('PEXPIRE', kRecord, UNHELD_TTL_MS)
  forgetBytes(kRecord)
end

-- Remembers the request's answer for the idempotency window (replacing the record).
local function recordReply(kRecord, reply, now, ttlMs)
  rcall('SET', kRecord, 'd' .. tostring(now + ttlMs) .. '|' .. reply, 'PX', ttlMs)
end
