--[[ usage: adds one answered call to an hour's totals (includes/usage.lua).
KEYS[1] usage:{hour}
ARGV[1] device id  ARGV[2] model  ARGV[3] priority  ARGV[4] prompt tokens
ARGV[5] completion tokens  ARGV[6] cost in USD  ARGV[7] keep ms
]]
local rcall = redis.call
--- @include "usage"
addUsage(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7])
return 1
