-- The coalescing flight lives in the cache entry's own key (value: 'F' leader job key | lease
-- end) until the leader's answer replaces it, so a leader that caches its answer has nothing
-- else to end.

-- Ends a coalescing flight, only the leader's own.
local function endFlight(flightKey, jobKey)
  local current = rcall('GET', flightKey)
  if current and string.match(current, '^F(.*)|%d+$') == jobKey then rcall('DEL', flightKey) end
end

local function flightValue(jobKey, leaseMs, now)
  return 'F' .. jobKey .. '|' .. tostring(now + leaseMs)
end

-- Makes `jobKey` the one job calling the upstream for a cache key unless another live job
-- already is. `current`: the key's value as freshAnswer read it (no fresh answer in it).
-- Returns the leader's job key.
local function takeFlight(kFlight, jobKey, leaseMs, now, current)
  if current then
    local holder, expires = string.match(current, '^F(.*)|(%d+)$')
    if holder and holder ~= jobKey and tonumber(expires) > now then return holder end
  end
  rcall('SET', kFlight, flightValue(jobKey, leaseMs, now), 'PX', leaseMs + 60000)
  return jobKey
end

-- The cache check and the flight in one command, for a job about to be claimed: the flight is
-- taken when the key is empty (the common case); else the key's value is returned as read.
-- Returns the value (nil when the flight was taken).
local function checkAndFly(kFlight, jobKey, leaseMs, now)
  return rcall('SET', kFlight, flightValue(jobKey, leaseMs, now), 'NX', 'GET', 'PX', leaseMs + 60000) or nil
end
