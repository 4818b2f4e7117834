-- A response cache entry (`expiresAt|answer JSON`; PX is only a backstop): the answer JSON
-- while it is fresh at `now`, else nil. The same key holds the coalescing flight (`F…`,
-- includes/flight.lua) until the answer replaces it.
local function freshAnswer(kCache, now)
  local cached = rcall('GET', kCache)
  if not cached or string.sub(cached, 1, 1) == 'F' then return nil end
  local expires, answer = string.match(cached, '^(%d+)|(.*)$')
  if tonumber(expires) > now then return answer end
  return nil
end
