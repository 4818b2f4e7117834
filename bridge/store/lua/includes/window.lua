-- A rolling-window counter in one hash: calls per bucket of BUCKET_MS ('c'..n for the times in
-- ((n-1)·BUCKET_MS, n·BUCKET_MS], and tokens 't'..n when they are counted), with the totals of the buckets still in the window ('n'
-- calls, 'w' tokens) and the oldest of them ('o'), so a check reads three fields. A bucket
-- counts until all of it has left the window: "at most N in any rolling window" holds
-- exactly, and a slot frees at most one bucket late. A window is opened once per script (the
-- upstream's budget once per `many` call: openSharedWindow), tried per call in Lua, and
-- written back once; the key expires two windows after its newest bucket.
local BUCKET_MS = 2000

-- An integer as all its digits: Lua joins a number of 1e14 or more to a string as '1e+14',
-- and Redis reads one passed as an argument from 1e17 so, while call ids (settle.lua) and
-- HINCRBY need digits.
local function digits(n)
  return string.format('%.0f', n)
end

-- Drops the buckets that left the window, and recounts the totals from those left.
local function resyncWindow(w)
  local all = rcall('HGETALL', w.key)
  local count, weight, oldest, gone = 0, 0, w.last, {}
  for i = 1, #all, 2 do
    local field, kind = all[i], string.sub(all[i], 1, 1)
    local b = (kind == 'c' or kind == 't') and tonumber(string.sub(field, 2))
    if b and b < w.first then
      gone[#gone + 1] = field
    elseif b then
      if kind == 'c' then count = count + tonumber(all[i + 1]) else weight = weight + tonumber(all[i + 1]) end
      oldest = math.min(oldest, b)
    end
  end
  if #gone > 0 then rcall('HDEL', w.key, unpack(gone)) end
  w.count, w.weight, w.oldest, w.moved = count, weight, oldest, true
end

-- `extra`: one more field of the same hash to read along (the upstream pause), or nil.
local function openWindow(key, now, windowMs, withTokens, extra)
  local last = math.ceil(now / BUCKET_MS)
  local v = rcall('HMGET', key, 'n', 'w', 'o', extra or 'n')
  local w = {
    key = key, first = math.floor((now - windowMs) / BUCKET_MS) + 1, last = last, windowMs = windowMs,
    withTokens = withTokens, count = tonumber(v[1] or '0'), weight = tonumber(v[2] or '0'),
    oldest = tonumber(v[3] or last), taken = {}, sum = 0, extra = extra and v[4], moved = false,
  }
  if w.oldest < w.first then resyncWindow(w) end
  return w
end

-- True when a call of `tokens` fits now (tokenLimit nil: tokens are not limited); it is then
-- counted, and written by closeWindow.
local function tryWindow(w, tokens, limit, tokenLimit)
  local count, weight = w.count + #w.taken, w.weight + w.sum
  -- A single call larger than the whole budget may still run alone, or it never would:
  -- admission refuses such estimates, but one queued before RATE_LIMIT_TPM was lowered may be.
  if count < limit and (tokenLimit == nil or weight + tokens <= tokenLimit or count == 0) then
    w.taken[#w.taken + 1] = tokens
    w.sum = w.sum + tokens
    return true
  end
  return false
end

-- Writes `n` calls of `sum` tokens into the window's newest bucket, and its totals.
local function writeWindow(w, n, sum)
  local fresh = false
  if n > 0 then
    fresh = rcall('HINCRBY', w.key, 'c' .. w.last, n) == n
    if w.withTokens then rcall('HINCRBY', w.key, 't' .. w.last, digits(sum)) end
  end
  if w.moved or fresh then
    rcall('HSET', w.key, 'n', w.count, 'w', digits(w.weight), 'o', math.min(w.oldest, w.last))
    if fresh then rcall('PEXPIRE', w.key, w.windowMs * 2) end
  elseif n > 0 then
    rcall('HINCRBY', w.key, 'n', n)
    if w.withTokens then rcall('HINCRBY', w.key, 'w', sum) end
  end
  w.moved = false
end

-- Counts the calls tried in, written now or, for the call's shared window, when the call ends;
-- returns their ids ('bucket:tokens'), in the order they were taken.
local function closeWindow(w)
  local n = #w.taken
  local ids = {}
  for i, tokens in ipairs(w.taken) do ids[i] = digits(w.last) .. ':' .. digits(tokens) end
  w.count, w.weight = w.count + n, w.weight + w.sum
  if w.pendingN then
    w.pendingN, w.pendingSum = w.pendingN + n, w.pendingSum + w.sum
  else
    writeWindow(w, n, w.sum)
  end
  w.taken, w.sum = {}, 0
  return ids
end

-- The shared window's counts so far, written; it stays open for the call's next steps.
local function writePending(w)
  writeWindow(w, w.pendingN, w.pendingSum)
  w.pendingN, w.pendingSum = 0, 0
end

-- A window every step of a `many` call shares (the upstream's budget): read by the first step
-- that opens it, counted by each, written when the call ends. A step that writes the hash
-- itself (settle, pause) closes it first (leaveSharedWindow). Outside `many`, a plain window.
local function openSharedWindow(key, now, windowMs, withTokens, extra)
  local w = CALL.window
  local first, last = math.floor((now - windowMs) / BUCKET_MS) + 1, math.ceil(now / BUCKET_MS)
  if w and w.key == key and w.first == first and w.last == last and w.withTokens == withTokens and w.windowMs == windowMs then return w end
  if w then writePending(w) end
  w = openWindow(key, now, windowMs, withTokens, extra)
  if CALL.shared then
    w.pendingN, w.pendingSum = 0, 0
    CALL.window = w
  end
  return w
end

-- Before a step writes the shared window's hash itself: the counts so far go out, and the next
-- step reads the hash again.
local function leaveSharedWindow()
  if CALL.window then writePending(CALL.window) end
  CALL.window = nil
end

-- After closeWindow: the earliest time a call of `tokens` would fit (buckets leave in order).
local function windowFreeAt(w, tokens, limit, tokenLimit, now)
  if w.pendingN then writePending(w) end -- the buckets are read below
  local count, weight = w.count, w.weight
  local function fits()
    return count < limit and (tokenLimit == nil or weight + tokens <= tokenLimit or count == 0)
  end
  if fits() then return now end
  local fields = {}
  for b = w.first, w.last do
    fields[#fields + 1] = 'c' .. b
    fields[#fields + 1] = 't' .. b
  end
  local v = rcall('HMGET', w.key, unpack(fields))
  for i = 0, w.last - w.first do
    count, weight = count - tonumber(v[2 * i + 1] or '0'), weight - tonumber(v[2 * i + 2] or '0')
    if fits() then return (w.first + i) * BUCKET_MS + w.windowMs end
  end
  return w.last * BUCKET_MS + w.windowMs
end
