-- Claiming, shared by claim and admit (which claims right after enqueueing when asked, so
-- a request arriving at an idle instance costs one round trip rather than two). Needs keys,
-- members, records, queue and window. The upstream's budget is a rolling window in
-- K.budget, whose field 'pause' holds the time a 429 paused the upstream until.

local BUDGET_WINDOW_MS = 60000

local function openBudget(now, tpm)
  return openWindow(K.budget, now, BUDGET_WINDOW_MS, tpm ~= nil, 'pause')
end

-- A waiting job whose deadline passed, taken out of the queue: {jobJSON, attempts, recorded or ''}.
local function expire(key, out)
  local v = readJob(rec(key), 'w', 'j', 'a', 'r')
  if dequeue(key, v[1]) then
    letGo(rec(key))
    out[#out + 1] = v[2] or ''
    out[#out + 1] = v[3] or '0'
    out[#out + 1] = v[4] or ''
  else
    rcall('ZREM', K.deadlines, key) -- not waiting: its entry must not come back every claim
  end
end

-- Takes one job off the head of the window for `owner`: its record names the holder.
-- Returns its claimed entry {jobJSON, attempts, fence or '', recorded or ''} and its deadline.
local function lease(key, owner, fence, score, member)
  local r = rec(key)
  local v = rcall('HMGET', r, 'j', 'a', 'r', 't')
  local deadline = v[4] or ''
  rcall('HSET', r, 'o', packOwner(owner, fence, score, deadline, member), 'w', '')
  return { v[1] or '', v[2] or '0', fence, v[3] or '' }, deadline
end

-- Expires due jobs, then takes the best jobs by score whose lock is free, each with one
-- upstream rate token, leased to `owner`; jobs whose lock is held are parked behind it.
-- Returns claimed = flat {jobJSON, attempts, fence or '', callId, recorded reply or ''}...,
-- expired = flat {jobJSON, attempts, recorded reply or ''}..., retryAt or '', and the claimed
-- jobs' keys. A recorded reply (record.lua) is the job's answer already: its holder publishes it.
-- Long: one pass over the queue window, kept whole so its bulk writes read in one place.
local function claimJobs(owner, max, leaseMs, rpm, tpm, now)
  local expired = {}
  for _, key in ipairs(rcall('ZRANGEBYSCORE', K.deadlines, '-inf', now, 'LIMIT', 0, 1000)) do expire(key, expired) end

  local budget = openBudget(now, tpm)
  local pausedUntil = tonumber(budget.extra or '0')
  if pausedUntil > now then return {}, expired, tostring(pausedUntil), {} end

  local keys, entries = {}, {}
  local grantedHere = {} -- locks granted by this call: their leases are written in bulk later
  local blocked = false
  while #keys < max and not blocked do
    -- A window of the best waiting jobs; parking can empty it, then the next window is read.
    local window = rcall('ZRANGE', K.queue, 0, (max - #keys) * 2 - 1, 'WITHSCORES')
    if #window == 0 then break end
    local taken, leases, gone, depth = {}, {}, {}, {}
    for i = 1, #window, 2 do
      local member, score = window[i], window[i + 1]
      local _, prio, lockId, tokens, key = parseMember(member)
      local holder = lockId ~= '-' and rcall('HGET', K.locks, lockId)
      -- A holder whose lease ran out no longer holds the lock, reaped or not.
      if grantedHere[lockId] or (holder and tonumber(rcall('ZSCORE', K.leases, holder) or '0') > now) then
        local parked = parkedMember(lockId, score, member)
        rcall('ZADD', K.parked, 0, parked)
        rcall('HSET', rec(key), 'w', 'p' .. parked)
        taken[#taken + 1] = member
      elseif #keys >= max or not tryWindow(budget, tokens, rpm, tpm) then
        blocked = #keys < max
        break
      else
        taken[#taken + 1] = member
        local fence = ''
        if lockId ~= '-' then
          fence = tostring(rcall('HINCRBY', K.fences, lockId, 1))
          rcall('HSET', K.locks, lockId, key)
          grantedHere[lockId] = true
        end
        local entry, deadline = lease(key, owner, fence, score, member)
        if deadline ~= '' then gone[#gone + 1] = key end
        leases[#leases + 1] = now + leaseMs
        leases[#leases + 1] = key
        depth[prio] = (depth[prio] or 0) - 1
        keys[#keys + 1] = key
        entries[#entries + 1] = entry
      end
    end
    if #taken > 0 then rcall('ZREM', K.queue, unpack(taken)) end
    if #leases > 0 then rcall('ZADD', K.leases, unpack(leases)) end
    if #gone > 0 then rcall('ZREM', K.deadlines, unpack(gone)) end
    for prio, delta in pairs(depth) do rcall('HINCRBY', K.depth, prio, delta) end
  end
  local callIds = closeWindow(budget)
  local retryAt = ''
  if blocked then
    local _, _, _, tokens = parseMember(rcall('ZRANGE', K.queue, 0, 0)[1])
    retryAt = tostring(windowFreeAt(budget, tokens, rpm, tpm, now))
  end

  local claimed = {}
  for i, e in ipairs(entries) do
    claimed[#claimed + 1] = e[1]
    claimed[#claimed + 1] = e[2]
    claimed[#claimed + 1] = e[3]
    claimed[#claimed + 1] = callIds[i]
    claimed[#claimed + 1] = e[4]
  end
  return claimed, expired, retryAt, keys
end
