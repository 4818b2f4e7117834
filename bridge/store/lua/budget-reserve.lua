--[[ budget-reserve: reserves a request's estimate in every budget it counts against, all or
none: refused when, for a budget that may refuse it, what is used and reserved plus this
estimate would be over the limit.
KEYS[i] spend:{budget}:{period}, one per charge
ARGV, per charge (5 each): subject, limit, estimate, exempt ('1' never refuses), expire at (ms)
Returns 0, or the position (from 1) of the first charge that refused.
]]
for i = 1, #KEYS do
  local a = (i - 1) * 5
  if ARGV[a + 4] ~= '1' then
    local v = rcall('HMGET', KEYS[i], ARGV[a + 1] .. '\tu', ARGV[a + 1] .. '\tr')
    if tonumber(v[1] or '0') + tonumber(v[2] or '0') + tonumber(ARGV[a + 3]) > tonumber(ARGV[a + 2]) then return i end
  end
end
for i = 1, #KEYS do
  local a = (i - 1) * 5
  rcall('HINCRBYFLOAT', KEYS[i], ARGV[a + 1] .. '\tr', ARGV[a + 3])
  rcall('PEXPIREAT', KEYS[i], ARGV[a + 5])
end
return 0
