-- Budgets' spend records (budget-spend.ts), one hash per budget and period with a used (TAB u)
-- and a reserved (TAB r) amount per subject. Ending `count` reservations: for charge i (from
-- 0), keys[firstKey + i] is its record and args[firstArg + 3i ...] its subject, estimate and
-- what the request used (0 when it failed); the estimate leaves reserved, the use joins used.
local function settleSpend(keys, args, firstKey, firstArg, count)
  for i = 0, count - 1 do
    local k, a = keys[firstKey + i], firstArg + i * 3
    rcall('HINCRBYFLOAT', k, args[a] .. '\tr', -tonumber(args[a + 1]))
    if tonumber(args[a + 2]) ~= 0 then rcall('HINCRBYFLOAT', k, args[a] .. '\tu', args[a + 2]) end
  end
end
