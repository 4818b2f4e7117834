--[[ session-join: registers a start of an instance on the plant's broker, a new generation.
KEYS[1] sessions  KEYS[2] alive:{instance}  KEYS[3] sessions:seq
ARGV[1] instance id  ARGV[2] the record (JSON)  ARGV[3] lease TTL ms
Returns the generation. An adoption of an earlier generation no longer holds (adopt-hold).
]]
local generation = rcall('INCR', KEYS[3])
rcall('HSET', KEYS[1], ARGV[1], generation .. '|' .. ARGV[2])
rcall('SET', KEYS[2], generation, 'PX', ARGV[3])
return generation
