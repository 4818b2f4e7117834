--[[ claim: expire due jobs, then take the best jobs by score whose lock is free, each with
one upstream rate token, leased to the owner. Jobs whose lock is held are parked behind it.
KEYS[1] queue  KEYS[2] parked  KEYS[3] jobs  KEYS[4] attempts  KEYS[5] place
KEYS[6] deadlines  KEYS[7] depth  KEYS[8] leases  KEYS[9] owners  KEYS[10] locks
KEYS[11] fences  KEYS[12] calls  KEYS[13] call tokens  KEYS[14] pause  KEYS[15] seq
ARGV[1] owner  ARGV[2] max jobs  ARGV[3] lease ms  ARGV[4] rpm  ARGV[5] tpm or ''
ARGV[6] now ms  ARGV[7] rate window ms
Returns {claimed, expired, retryAt or ''}: claimed = flat {jobJSON, attempts, fence or '', callId}...,
expired = flat {jobJSON, attempts}...
]]
local rcall = redis.call
--- @include "members"
--- @include "queue"
--- @include "rate"

local owner, max, leaseMs = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local rpm, tpm, now, windowMs = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

-- Reads one field per key of a hash in one call, '' (or `default`) for absent ones.
local function hmget(hash, keys, default)
  if #keys == 0 then return {} end
  local values = rcall('HMGET', hash, unpack(keys))
  for i = 1, #keys do if not values[i] then values[i] = default end end
  return values
end

local expired = {}
local due = rcall('ZRANGEBYSCORE', KEYS[6], '-inf', now, 'LIMIT', 0, 1000)
if #due > 0 then
  local gone = {}
  for _, key in ipairs(due) do
    if dequeue(KEYS[1], KEYS[2], KEYS[5], KEYS[6], KEYS[7], key) then gone[#gone + 1] = key end
  end
  local data, attempts = hmget(KEYS[3], gone, ''), hmget(KEYS[4], gone, '0')
  for i = 1, #gone do
    expired[#expired + 1] = data[i]
    expired[#expired + 1] = attempts[i]
  end
end

local pausedUntil = tonumber(rcall('GET', KEYS[14]) or '0')
if pausedUntil > now then return {{}, expired, tostring(pausedUntil)} end

local budget = openBudget(KEYS[12], KEYS[13], now, windowMs)
local keys, fences = {}, {}
local grantedHere = {} -- locks granted by this call: their leases are written in bulk later
local retryAt = ''
local blocked = false
while #keys < max and not blocked do
  -- A window of the best waiting jobs; parking can empty it, then the next window is read.
  local window = rcall('ZRANGE', KEYS[1], 0, (max - #keys) * 2 - 1, 'WITHSCORES')
  if #window == 0 then break end
  local taken, leases, owners, places, depth = {}, {}, {}, {}, {}
  for i = 1, #window, 2 do
    local member, score = window[i], window[i + 1]
    local _, prio, lockId, tokens, key = parseMember(member)
    local holder = lockId ~= '-' and rcall('HGET', KEYS[10], lockId)
    -- A holder whose lease ran out no longer holds the lock, reaped or not.
    if grantedHere[lockId] or (holder and tonumber(rcall('ZSCORE', KEYS[8], holder) or '0') > now) then
      local parked = parkedMember(lockId, score, member)
      rcall('ZADD', KEYS[2], 0, parked)
      taken[#taken + 1] = member
      places[#places + 1] = key
      places[#places + 1] = 'p' .. parked
    elseif #keys >= max or not tryBudget(budget, tokens, rpm, tpm) then
      blocked = #keys < max
      break
    else
      taken[#taken + 1] = member
      local fence = ''
      if lockId ~= '-' then
        fence = tostring(rcall('HINCRBY', KEYS[11], lockId, 1))
        rcall('HSET', KEYS[10], lockId, key)
        grantedHere[lockId] = true
      end
      local deadline = rcall('ZSCORE', KEYS[6], key) or ''
      leases[#leases + 1] = now + leaseMs
      leases[#leases + 1] = key
      owners[#owners + 1] = key
      owners[#owners + 1] = packOwner(owner, fence, score, deadline, member)
      depth[prio] = (depth[prio] or 0) - 1
      keys[#keys + 1] = key
      fences[#fences + 1] = fence
    end
  end
  if #taken > 0 then rcall('ZREM', KEYS[1], unpack(taken)) end
  if #places > 0 then rcall('HSET', KEYS[5], unpack(places)) end
  if #leases > 0 then
    rcall('ZADD', KEYS[8], unpack(leases))
    rcall('HSET', KEYS[9], unpack(owners))
    local claimedKeys = {}
    for i = 2, #owners, 2 do claimedKeys[#claimedKeys + 1] = owners[i - 1] end
    rcall('HDEL', KEYS[5], unpack(claimedKeys))
    rcall('ZREM', KEYS[6], unpack(claimedKeys))
  end
  for prio, delta in pairs(depth) do rcall('HINCRBY', KEYS[7], prio, delta) end
end
local callIds = closeBudget(budget, KEYS[12], KEYS[13], KEYS[15], now, windowMs)
if blocked then
  local top = rcall('ZRANGE', KEYS[1], 0, 0)[1]
  local _, _, _, tokens = parseMember(top)
  retryAt = tostring(budgetFreeAt(budget, KEYS[12], tokens, rpm, tpm, now, windowMs))
end

local claimed = {}
local data, attempts = hmget(KEYS[3], keys, ''), hmget(KEYS[4], keys, '0')
for i = 1, #keys do
  claimed[#claimed + 1] = data[i]
  claimed[#claimed + 1] = attempts[i]
  claimed[#claimed + 1] = fences[i]
  claimed[#claimed + 1] = callIds[i]
end
return {claimed, expired, retryAt}
