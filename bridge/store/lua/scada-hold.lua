--[[ scada-hold: takes an Edge Node's publisher lease, or renews it, for its owner only.
KEYS[1] scada:lease:{node}  ARGV[1] owner  ARGV[2] TTL ms
Returns 1 while `owner` holds the lease, 0 when another does.
]]
local holder = rcall('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
rcall('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
