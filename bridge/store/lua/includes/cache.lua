-- A response cache entry (`expiresAt|answer JSON`; PX is only a backstop). The same key holds
-- the coalescing flight (`F…`, includes/flight.lua) until the answer replaces it.

-- The answer JSON in a cache key's value while it is fresh at `now`, else nil.
local function answerIn(value, now)
  if not value or string.sub(value, 1, 1) == 'F' then return nil end
  local expires, answer = string.match(value, '^(%d+)|(.*)$')
  if tonumber(expires) > now then return answer end
  return nil
end

-- Reads the key: the fresh answer or nil, and the value as read (what takeFlight decides on).
local function freshAnswer(kCache, now)
  local value = rcall('GET', kCache)
  return answerIn(value, now), value
end
