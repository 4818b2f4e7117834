--[[ claim: expire due jobs, then take the best jobs by score whose lock is free, each with
one upstream rate token, leased to the owner. Jobs whose lock is held are parked behind it.
KEYS[1] queue  KEYS[2] parked  KEYS[3] jobs  KEYS[4] attempts  KEYS[5] place
KEYS[6] deadlines  KEYS[7] depth  KEYS[8] leases  KEYS[9] owners  KEYS[10] locks
KEYS[11] fences  KEYS[12] calls  KEYS[13] call tokens  KEYS[14] pause  KEYS[15] seq
ARGV[1] owner  ARGV[2] max jobs  ARGV[3] lease ms  ARGV[4] rpm  ARGV[5] tpm or ''
ARGV[6] now ms  ARGV[7] rate window ms
Returns {claimed, expired, retryAt or ''}: claimed = flat {jobJSON, attempts, fence or ''}...,
expired = flat {jobJSON, attempts}...
]]
local rcall = redis.call
--- @include "members"
--- @include "queue"
--- @include "rate"

local owner, max, leaseMs = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local rpm, tpm, now, windowMs = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

local expired = {}
for _, key in ipairs(rcall('ZRANGEBYSCORE', KEYS[6], '-inf', now, 'LIMIT', 0, 1000)) do
  if dequeue(KEYS[1], KEYS[2], KEYS[5], KEYS[6], KEYS[7], key) then
    expired[#expired + 1] = rcall('HGET', KEYS[3], key)
    expired[#expired + 1] = rcall('HGET', KEYS[4], key) or '0'
  end
end

local pausedUntil = tonumber(rcall('GET', KEYS[14]) or '0')
if pausedUntil > now then return {{}, expired, tostring(pausedUntil)} end

local claimed = {}
local retryAt = ''
local n = 0
while n < max do
  local top = rcall('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if #top == 0 then break end
  local member, score = top[1], top[2]
  local _, prio, lockId, tokens, key = parseMember(member)
  local holder = lockId ~= '-' and rcall('HGET', KEYS[10], lockId)
  -- A holder whose lease ran out no longer holds the lock, reaped or not.
  if holder and tonumber(rcall('ZSCORE', KEYS[8], holder) or '0') > now then
    rcall('ZREM', KEYS[1], member)
    local parked = parkedMember(lockId, score, member)
    rcall('ZADD', KEYS[2], 0, parked)
    rcall('HSET', KEYS[5], key, 'p' .. parked)
  else
    local ok, at = takeRate(KEYS[12], KEYS[13], KEYS[15], tokens, rpm, tpm, now, windowMs)
    if not ok then
      retryAt = tostring(at)
      break
    end
    rcall('ZREM', KEYS[1], member)
    rcall('HDEL', KEYS[5], key)
    local deadline = rcall('ZSCORE', KEYS[6], key) or ''
    rcall('ZREM', KEYS[6], key)
    rcall('HINCRBY', KEYS[7], prio, -1)
    local fence = ''
    if lockId ~= '-' then
      fence = tostring(rcall('HINCRBY', KEYS[11], lockId, 1))
      rcall('HSET', KEYS[10], lockId, key)
    end
    rcall('ZADD', KEYS[8], now + leaseMs, key)
    rcall('HSET', KEYS[9], key, packOwner(owner, fence, score, deadline, member))
    claimed[#claimed + 1] = rcall('HGET', KEYS[3], key)
    claimed[#claimed + 1] = rcall('HGET', KEYS[4], key) or '0'
    claimed[#claimed + 1] = fence
    n = n + 1
  end
end
return {claimed, expired, retryAt}
