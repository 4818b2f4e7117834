--[[ dlq-upgrade: moves the oldest entries of 0.7's dead-letter list (one list key of entry JSON)
into the bounded list (includes/dead-letters.lua), each only if it is still at the list's head,
so two instances starting at once move each entry once.
KEYS[1] the old list
ARGV[1] the key prefix (includes/keys.lua)  ARGV[2] '<DLQ_MAX>|<DLQ_MAX_BYTES>|<oldest kept>|'
ARGV[3..] per entry, 3 values: the raw entry, its job key, its time (13 digits)
Returns {moved, dropped for the bounds}.
]]
--- @include "keys"
--- @include "dead-letters"

local moved, dropped = 0, 0
for i = 3, #ARGV, 3 do
  if rcall('LINDEX', KEYS[1], 0) ~= ARGV[i] then break end
  rcall('LPOP', KEYS[1])
  dropped = dropped + dlqAdd(ARGV[i + 1], ARGV[2] .. ARGV[i + 2] .. '|' .. ARGV[i])
  moved = moved + 1
end
return {moved, dropped}
