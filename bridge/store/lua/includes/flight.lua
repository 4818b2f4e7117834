-- Ends a coalescing flight, only the leader's own (flight value: leader job key | lease end).
local function endFlight(flightKey, jobKey)
  local current = rcall('GET', flightKey)
  if current and string.match(current, '^(.*)|%d+$') == jobKey then rcall('DEL', flightKey) end
end
