--[[ budget-settle: ends reservations: each charge's estimate leaves what is reserved, and what
the request really used (0 when it failed) joins what is used.
KEYS[i] spend:{budget}:{period}, one per charge
ARGV, per charge (3 each): subject, estimate, used
]]
for i = 1, #KEYS do
  local a = (i - 1) * 3
  rcall('HINCRBYFLOAT', KEYS[i], ARGV[a + 1] .. '\tr', -tonumber(ARGV[a + 2]))
  if tonumber(ARGV[a + 3]) ~= 0 then rcall('HINCRBYFLOAT', KEYS[i], ARGV[a + 1] .. '\tu', ARGV[a + 3]) end
end
return 1
