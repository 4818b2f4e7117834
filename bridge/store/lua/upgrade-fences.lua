--[[ upgrade-fences: folds one batch of 0.7's per-lock fences (a hash, lockId → last fencing
number) into the one counter every grant now draws from: the counter ends above every number
the hash held, so each lock's next fence is still higher than its last, and the fields go.
Atomic and safe to run twice or from two instances at once.
KEYS[1] the old fences hash  KEYS[2] the fence counter
ARGV[1..] lockIds (fields of KEYS[1])
Returns how many fields the hash still holds.
]]
local values = rcall('HMGET', KEYS[1], unpack(ARGV))
local highest = tonumber(rcall('GET', KEYS[2]) or '0')
for _, v in ipairs(values) do
  if v and tonumber(v) > highest then highest = tonumber(v) end
end
rcall('SET', KEYS[2], string.format('%d', highest))
rcall('HDEL', KEYS[1], unpack(ARGV))
return rcall('HLEN', KEYS[1])
