-- A response cache entry (`expiresAt|answer JSON`; PX is only a backstop): the answer JSON
-- while it is fresh at `now`, else nil; and the key's value as read. The same key holds the
-- coalescing flight (`F…`, includes/flight.lua) until the answer replaces it, so the value
-- read here is what takeFlight decides on.
local function freshAnswer(kCache, now)
  local cached = rcall('GET', kCache)
  if not cached or string.sub(cached, 1, 1) == 'F' then return nil, cached end
  local expires, answer = string.match(cached, '^(%d+)|(.*)$')
  if tonumber(expires) > now then return answer, cached end
  return nil, cached
end
