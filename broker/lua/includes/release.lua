-- Releases a queue entry: `packet:{broker}:{counter}`, or a QoS 2 copy
-- `outgoing:{client}:{broker}:{counter}` (aedes-persistence-redis 11.2.2's layout, cluster.ts).
local function release(prefix, entry)
  local broker, counter = string.match(entry, ':([^:]+):([^:]+)$')
  if not broker then return end
  if string.sub(entry, 1, 7) ~= 'packet:' then redis.call('DEL', prefix .. entry) end
  local packet = prefix .. 'packet:' .. broker .. ':' .. counter
  if redis.call('DECR', packet .. ':offlineCount') <= 0 then redis.call('DEL', packet, packet .. ':offlineCount') end
end
