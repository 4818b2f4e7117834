-- Ends a coalescing flight, only the leader's own (flight value: leader job key | lease end).
local function endFlight(flightKey, jobKey)
  local current = rcall('GET', flightKey)
  if current and string.match(current, '^(.*)|%d+$') == jobKey then rcall('DEL', flightKey) end
end

-- Makes `jobKey` the one job calling the upstream for a cache key unless another live job
-- already is (flight value: leader job key | lease end). Returns the leader's job key.
local function takeFlight(kFlight, jobKey, leaseMs, now)
  local current = rcall('GET', kFlight)
  if current then
    local holder, expires = string.match(current, '^(.*)|(%d+)$')
    if holder ~= jobKey and tonumber(expires) > now then return holder end
  end
  rcall('SET', kFlight, jobKey .. '|' .. tostring(now + leaseMs), 'PX', leaseMs + 60000)
  return jobKey
end
