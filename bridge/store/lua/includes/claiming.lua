-- Claiming, shared by claim and admit (which claims right after enqueueing when asked, so
-- a request arriving at an idle instance costs one round trip rather than two). Needs keys,
-- members, fair, records, queue and window. The upstream's budget is a rolling window in
-- K.budget, whose field 'pause' holds the time a 429 paused the upstream until.

local BUDGET_WINDOW_MS = 60000

local function openBudget(now, tpm)
  return openSharedWindow(K.budget, now, BUDGET_WINDOW_MS, tpm ~= nil, 'pause')
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

-- Takes one job off the queue for `owner`: its record names the holder. Returns its claimed
-- entry {jobJSON, attempts, fence or '', recorded or ''}, its deadline and its fair-share cost.
local function lease(key, owner, fence, score, member)
  local r = rec(key)
  local v = rcall('HMGET', r, 'j', 'a', 'r', 't', 'c')
  local deadline = v[4] or ''
  rcall('HSET', r, 'o', packOwner(owner, fence, score, deadline, member), 'w', '')
  return { v[1] or '', v[2] or '0', fence, v[3] or '' }, deadline, tonumber(v[5] or '0')
end

-- Expires due jobs, then takes jobs one by one, each with one upstream rate token, leased to
-- `owner`: the class of the best score, and in it the fair pick (fair.lua); a job whose lock
-- is held is parked behind it instead.
-- Returns claimed = flat {jobJSON, attempts, fence or '', callId, recorded reply or ''}...,
-- expired = flat {jobJSON, attempts, recorded reply or ''}..., retryAt or '', and the claimed
-- jobs' keys. A recorded reply (record.lua) is the job's answer already: its holder publishes it.
-- Long: one pass over the queue, kept whole so its bulk writes read in one place.
local function claimJobs(owner, max, leaseMs, rpm, tpm, now)
  local expired = {}
  for _, key in ipairs(rcall('ZRANGEBYSCORE', K.deadlines, '-inf', now, 'LIMIT', 0, 1000)) do expire(key, expired) end

  local budget = openBudget(now, tpm)
  local pausedUntil = tonumber(budget.extra or '0')
  if pausedUntil > now then return {}, expired, tostring(pausedUntil), {} end

  local keys, entries, leases, gone, depth = {}, {}, {}, {}, {}
  local grantedHere = {} -- locks granted by this call: their leases are written in bulk later
  local blockedTokens
  while #keys < max do
    local top = rcall('ZRANGE', K.queue, 0, 0, 'WITHSCORES')
    if not top[1] then break end
    local member, score, known = fairPick(top[1], top[2])
    local _, prio, lockId, tokens, key = parseMember(member)
    local holder = lockId ~= '-' and rcall('HGET', K.locks, lockId)
    -- A holder whose lease ran out no longer holds the lock, reaped or not.
    if grantedHere[lockId] or (holder and tonumber(rcall('ZSCORE', K.leases, holder) or '0') > now) then
      local parked = parkedMember(lockId, score, member)
      rcall('ZADD', K.parked, 0, parked)
      rcall('HSET', rec(key), 'w', 'p' .. parked)
      rcall('ZREM', K.queue, member)
      laneRemove(member, 0, known)
    elseif not tryWindow(budget, tokens, rpm, tpm) then
      blockedTokens = tokens
      break
    else
      rcall('ZREM', K.queue, member)
      local fence = ''
      if lockId ~= '-' then
        -- One counter for every lock: a key's fences rise, and no lock name is remembered.
        fence = tostring(rcall('INCR', K.fence))
        rcall('HSET', K.locks, lockId, key)
        grantedHere[lockId] = true
      end
      local entry, deadline, cost = lease(key, owner, fence, score, member)
      laneRemove(member, cost, known)
      if deadline ~= '' then gone[#gone + 1] = key end
      leases[#leases + 1] = now + leaseMs
      leases[#leases + 1] = key
      depth[prio] = (depth[prio] or 0) - 1
      keys[#keys + 1] = key
      entries[#entries + 1] = entry
    end
  end
  if #leases > 0 then rcall('ZADD', K.leases, unpack(leases)) end
  if #gone > 0 then rcall('ZREM', K.deadlines, unpack(gone)) end
  for prio, delta in pairs(depth) do changeDepth(prio, delta) end
  local callIds = closeWindow(budget)
  local retryAt = ''
  if blockedTokens then retryAt = tostring(windowFreeAt(budget, blockedTokens, rpm, tpm, now)) end

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
