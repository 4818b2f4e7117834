-- Claiming, shared by claim and admit (which claims right after enqueueing when asked, so
-- a request arriving at an idle instance costs one round trip rather than two). Needs
-- members, queue and rate. K holds the key names: queue, parked, jobs, attempts, place,
-- deadlines, depth, leases, owners, locks, fences, calls, callTokens, pause, seq, recorded.

-- Reads one field per key of a hash in one call, '' (or `default`) for absent ones.
local function hmget(hash, keys, default)
  if #keys == 0 then return {} end
  local values = rcall('HMGET', hash, unpack(keys))
  for i = 1, #keys do if not values[i] then values[i] = default end end
  return values
end

-- Expires due jobs, then takes the best jobs by score whose lock is free, each with one
-- upstream rate token, leased to `owner`; jobs whose lock is held are parked behind it.
-- Returns claimed = flat {jobJSON, attempts, fence or '', callId, recorded reply or ''}...,
-- expired = flat {jobJSON, attempts, recorded reply or ''}..., retryAt or '', and the claimed
-- jobs' keys. A recorded reply (record.lua) is the job's answer already: its holder publishes it.
local function claimJobs(K, owner, max, leaseMs, rpm, tpm, now, windowMs)
  local expired = {}
  local due = rcall('ZRANGEBYSCORE', K.deadlines, '-inf', now, 'LIMIT', 0, 1000)
  if #due > 0 then
    local gone = {}
    for _, key in ipairs(due) do
      if dequeue(K.queue, K.parked, K.place, K.deadlines, K.depth, key) then
        gone[#gone + 1] = key
      else
        rcall('ZREM', K.deadlines, key) -- not waiting: its entry must not come back every claim
      end
    end
    local data, attempts, recorded = hmget(K.jobs, gone, ''), hmget(K.attempts, gone, '0'), hmget(K.recorded, gone, '')
    for i = 1, #gone do
      expired[#expired + 1] = data[i]
      expired[#expired + 1] = attempts[i]
      expired[#expired + 1] = recorded[i]
    end
  end

  local pausedUntil = tonumber(rcall('GET', K.pause) or '0')
  if pausedUntil > now then return {}, expired, tostring(pausedUntil) end

  local budget = openBudget(K.calls, K.callTokens, now, windowMs)
  local keys, fences = {}, {}
  local grantedHere = {} -- locks granted by this call: their leases are written in bulk later
  local retryAt = ''
  local blocked = false
  while #keys < max and not blocked do
    -- A window of the best waiting jobs; parking can empty it, then the next window is read.
    local window = rcall('ZRANGE', K.queue, 0, (max - #keys) * 2 - 1, 'WITHSCORES')
    if #window == 0 then break end
    local taken, leases, owners, places, depth = {}, {}, {}, {}, {}
    for i = 1, #window, 2 do
      local member, score = window[i], window[i + 1]
      local _, prio, lockId, tokens, key = parseMember(member)
      local holder = lockId ~= '-' and rcall('HGET', K.locks, lockId)
      -- A holder whose lease ran out no longer holds the lock, reaped or not.
      if grantedHere[lockId] or (holder and tonumber(rcall('ZSCORE', K.leases, holder) or '0') > now) then
        local parked = parkedMember(lockId, score, member)
        rcall('ZADD', K.parked, 0, parked)
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
          fence = tostring(rcall('HINCRBY', K.fences, lockId, 1))
          rcall('HSET', K.locks, lockId, key)
          grantedHere[lockId] = true
        end
        local deadline = rcall('ZSCORE', K.deadlines, key) or ''
        leases[#leases + 1] = now + leaseMs
        leases[#leases + 1] = key
        owners[#owners + 1] = key
        owners[#owners + 1] = packOwner(owner, fence, score, deadline, member)
        depth[prio] = (depth[prio] or 0) - 1
        keys[#keys + 1] = key
        fences[#fences + 1] = fence
      end
    end
    if #taken > 0 then rcall('ZREM', K.queue, unpack(taken)) end
    if #places > 0 then rcall('HSET', K.place, unpack(places)) end
    if #leases > 0 then
      rcall('ZADD', K.leases, unpack(leases))
      rcall('HSET', K.owners, unpack(owners))
      local claimedKeys = {}
      for i = 2, #owners, 2 do claimedKeys[#claimedKeys + 1] = owners[i - 1] end
      rcall('HDEL', K.place, unpack(claimedKeys))
      rcall('ZREM', K.deadlines, unpack(claimedKeys))
    end
    for prio, delta in pairs(depth) do rcall('HINCRBY', K.depth, prio, delta) end
  end
  local callIds = closeBudget(budget, K.calls, K.callTokens, K.seq, now, windowMs)
  if blocked then
    local top = rcall('ZRANGE', K.queue, 0, 0)[1]
    local _, _, _, tokens = parseMember(top)
    retryAt = tostring(budgetFreeAt(budget, K.calls, tokens, rpm, tpm, now, windowMs))
  end

  local claimed = {}
  local data, attempts, recorded = hmget(K.jobs, keys, ''), hmget(K.attempts, keys, '0'), hmget(K.recorded, keys, '')
  for i = 1, #keys do
    claimed[#claimed + 1] = data[i]
    claimed[#claimed + 1] = attempts[i]
    claimed[#claimed + 1] = fences[i]
    claimed[#claimed + 1] = callIds[i]
    claimed[#claimed + 1] = recorded[i]
  end
  return claimed, expired, retryAt, keys
end

-- The admitted job itself, claimed straight away when nothing else waits (no job queued or
-- parked, so it is the head of the queue), it names no lock and its deadline is ahead: what
-- claimJobs would do for it, without first putting it in the queue and taking it out again.
-- `job`: key, data, score, deadline ('' for none), member, tokens, seq. Returns claimJobs' four
-- results, or nil when the ordinary path must decide (the upstream is paused, no budget).
local function claimAdmitted(K, owner, leaseMs, rpm, tpm, now, windowMs, job)
  if tonumber(rcall('GET', K.pause) or '0') > now then return nil end
  local budget = openBudget(K.calls, K.callTokens, now, windowMs)
  if not tryBudget(budget, job.tokens, rpm, tpm) then return nil end
  rcall('ZADD', K.leases, now + leaseMs, job.key)
  rcall('HSET', K.owners, job.key, packOwner(owner, '', job.score, job.deadline, job.member))
  -- The admission's seq names the call too: it is unique in the same counter.
  local callIds = closeBudget(budget, K.calls, K.callTokens, K.seq, now, windowMs, job.seq)
  return {job.data, '0', '', callIds[1], ''}, {}, '', {job.key}
end
