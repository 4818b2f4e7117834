-- The upstream's rolling-window budget: kCalls is a sorted set of calls (member seq:tokens,
-- score = time), kTokens their token sum. Exact "at most N in any window".
-- A budget is opened once per script, tried per call in Lua, and written back once.

local function openBudget(kCalls, kTokens, now, windowMs)
  local cutoff = now - windowMs
  local old = rcall('ZRANGEBYSCORE', kCalls, '-inf', cutoff)
  local weight = tonumber(rcall('GET', kTokens) or '0')
  if #old > 0 then
    local sum = 0
    for _, m in ipairs(old) do sum = sum + tonumber(string.match(m, ':(%d+)$')) end
    rcall('ZREMRANGEBYSCORE', kCalls, '-inf', cutoff)
    weight = rcall('DECRBY', kTokens, sum)
  end
  return { count = rcall('ZCARD', kCalls), weight = weight, taken = {}, sum = 0 }
end

-- True when a call of `tokens` fits now; it is then counted (written by closeBudget).
local function tryBudget(b, tokens, rpm, tpm)
  local count = b.count + #b.taken
  local weight = b.weight + b.sum
  -- A single call larger than the whole budget may still run alone, or it never would.
  if count < rpm and (tpm == nil or weight + tokens <= tpm or count == 0) then
    b.taken[#b.taken + 1] = tokens
    b.sum = b.sum + tokens
    return true
  end
  return false
end

-- Writes the calls tried in; returns their ids (members), in the order they were taken.
-- `last`: a seq value already drawn for a single call taken (an admission's); ignored otherwise.
local function closeBudget(b, kCalls, kTokens, kSeq, now, windowMs, last)
  local n = #b.taken
  if n == 0 then return {} end
  last = (n == 1 and last) or rcall('INCRBY', kSeq, n)
  local args, ids = {}, {}
  for i, tokens in ipairs(b.taken) do
    ids[i] = (last - n + i) .. ':' .. tokens
    args[#args + 1] = now
    args[#args + 1] = ids[i]
  end
  rcall('ZADD', kCalls, unpack(args))
  rcall('INCRBY', kTokens, b.sum)
  rcall('PEXPIRE', kCalls, windowMs * 2)
  rcall('PEXPIRE', kTokens, windowMs * 2)
  b.count, b.weight, b.taken, b.sum = b.count + n, b.weight + b.sum, {}, 0
  return ids
end

-- After closeBudget: the earliest time a call of `tokens` would fit.
local function budgetFreeAt(b, kCalls, tokens, rpm, tpm, now, windowMs)
  local at = now
  if b.count >= rpm then
    local r = rcall('ZRANGE', kCalls, b.count - rpm, b.count - rpm, 'WITHSCORES')
    at = math.max(at, tonumber(r[2]) + windowMs)
  end
  if tpm ~= nil and b.weight + tokens > tpm and b.count > 0 then
    local entries = rcall('ZRANGE', kCalls, 0, -1, 'WITHSCORES')
    local w = b.weight
    local maxWeight = tpm - tokens
    local t = tonumber(entries[#entries]) + windowMs
    for i = 1, #entries, 2 do
      if w <= maxWeight then
        t = (i == 1) and now or tonumber(entries[i - 1]) + windowMs
        break
      end
      w = w - tonumber(string.match(entries[i], ':(%d+)$'))
    end
    at = math.max(at, t)
  end
  return at
end
