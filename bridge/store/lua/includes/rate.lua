-- The upstream's rolling-window budget: kCalls is a sorted set of calls (member seq:tokens,
-- score = time), kTokens their token sum. Exact "at most N in any window" (RELIABILITY A13).

local function evictCalls(kCalls, kTokens, now, windowMs)
  local cutoff = now - windowMs
  local old = rcall('ZRANGEBYSCORE', kCalls, '-inf', cutoff)
  if #old == 0 then return end
  local sum = 0
  for _, m in ipairs(old) do sum = sum + tonumber(string.match(m, ':(%d+)$')) end
  rcall('ZREMRANGEBYSCORE', kCalls, '-inf', cutoff)
  rcall('DECRBY', kTokens, sum)
end

-- Returns true when a call of `tokens` may start now (and records it), else false and the
-- earliest time it may.
local function takeRate(kCalls, kTokens, kSeq, tokens, rpm, tpm, now, windowMs)
  evictCalls(kCalls, kTokens, now, windowMs)
  local count = rcall('ZCARD', kCalls)
  local weight = tonumber(rcall('GET', kTokens) or '0')
  local rpmFree = count < rpm
  -- A single call larger than the whole budget may still run alone, or it never would.
  local tpmFree = tpm == nil or weight + tokens <= tpm or count == 0
  if rpmFree and tpmFree then
    local seq = rcall('INCR', kSeq)
    rcall('ZADD', kCalls, now, seq .. ':' .. tokens)
    rcall('INCRBY', kTokens, tokens)
    rcall('PEXPIRE', kCalls, windowMs * 2)
    rcall('PEXPIRE', kTokens, windowMs * 2)
    return true, now
  end
  local at = now
  if not rpmFree then
    local r = rcall('ZRANGE', kCalls, count - rpm, count - rpm, 'WITHSCORES')
    at = math.max(at, tonumber(r[2]) + windowMs)
  end
  if not tpmFree then
    local entries = rcall('ZRANGE', kCalls, 0, -1, 'WITHSCORES')
    local w = weight
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
  return false, at
end
