--[[ adopt-claim: claims the sessions of a start whose lease lapsed, for one adopter.
KEYS[1] sessions  KEYS[2] alive:{instance}  KEYS[3] adopt:{instance}  KEYS[4] sessions:seq
ARGV[1] instance id  ARGV[2] generation  ARGV[3] adopter  ARGV[4] claim TTL ms
Returns the claim's token `{adopter}|{fencing number}`, or nil: another start registered, the
lease is held again, or another adopter holds a claim.
]]
local record = rcall('HGET', KEYS[1], ARGV[1])
if not record or string.match(record, '^(%d+)|') ~= ARGV[2] then return nil end
if rcall('EXISTS', KEYS[2]) == 1 or rcall('EXISTS', KEYS[3]) == 1 then return nil end
local token = ARGV[3] .. '|' .. rcall('INCR', KEYS[4])
rcall('SET', KEYS[3], token, 'PX', ARGV[4])
return token
