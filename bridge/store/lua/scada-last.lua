--[[ scada-last: one device-template's last good answer, unless it is older than the TTL.
KEYS[1] scada:good  KEYS[2] scada:records
ARGV[1] field (deviceId/template)  ARGV[2] now ms  ARGV[3] TTL ms
Returns the record JSON, or nil.
]]
local keptAt = rcall('ZSCORE', KEYS[1], ARGV[1])
if not keptAt or tonumber(keptAt) <= tonumber(ARGV[2]) - tonumber(ARGV[3]) then return false end
return rcall('HGET', KEYS[2], ARGV[1])
