--[[ session-renew: renews the liveness lease of one start of an instance.
KEYS[1] sessions  KEYS[2] alive:{instance}
ARGV[1] instance id  ARGV[2] generation  ARGV[3] lease TTL ms
Returns 1 renewed, 0 the record is gone (adopted), -1 another start registered since.
]]
local record = rcall('HGET', KEYS[1], ARGV[1])
if not record then return 0 end
if string.match(record, '^(%d+)|') ~= ARGV[2] then return -1 end
rcall('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1
