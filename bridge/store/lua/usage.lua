--[[ usage: adds one answered call to an hour's totals, under device, model and priority.
Fields are dimension TAB name TAB metric (r requests, p prompt tokens, c completion tokens,
usd estimated cost).
KEYS[1] usage:{hour}
ARGV[1] device id  ARGV[2] model  ARGV[3] priority  ARGV[4] prompt tokens
ARGV[5] completion tokens  ARGV[6] cost in USD  ARGV[7] keep ms
]]
local rcall = redis.call
for _, dim in ipairs({ {'d', ARGV[1]}, {'m', ARGV[2]}, {'p', ARGV[3]} }) do
  local base = dim[1] .. '\t' .. dim[2] .. '\t'
  rcall('HINCRBY', KEYS[1], base .. 'r', 1)
  rcall('HINCRBY', KEYS[1], base .. 'p', ARGV[4])
  rcall('HINCRBY', KEYS[1], base .. 'c', ARGV[5])
  rcall('HINCRBYFLOAT', KEYS[1], base .. 'usd', ARGV[6])
end
rcall('PEXPIRE', KEYS[1], ARGV[7])
return 1
