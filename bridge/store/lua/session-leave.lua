--[[ session-leave: removes an instance's record and lease (a clean stop).
KEYS[1] sessions  KEYS[2] alive:{instance}
ARGV[1] instance id  ARGV[2] generation, or '' for any
]]
local record = rcall('HGET', KEYS[1], ARGV[1])
if record and (ARGV[2] == '' or string.match(record, '^(%d+)|') == ARGV[2]) then
  rcall('HDEL', KEYS[1], ARGV[1])
  rcall('DEL', KEYS[2])
end
return 1
