-- Budgets' spend records (budget-spend.ts), one hash per budget and period with a used (TAB u)
-- and a reserved (TAB r) amount per subject.

-- A request's charges, all or none: for charge i (from 0), keys[firstKey + i] is its record and
-- args[firstArg + 5i ...] its subject, limit, estimate, exempt ('1' never refuses) and the
-- record's expiry (ms). Returns 0 when every charge fits, else the position (from 1) of the
-- first that refuses and whether it would fit but for the reservations (requests in flight).
local function spendRefusal(keys, args, firstKey, firstArg, count)
  for i = 0, count - 1 do
    local a = firstArg + i * 5
    if args[a + 3] ~= '1' then
      local v = rcall('HMGET', keys[firstKey + i], args[a] .. '\tu', args[a] .. '\tr')
      local used, estimate, limit = tonumber(v[1] or '0'), tonumber(args[a + 2]), tonumber(args[a + 1])
      if used + tonumber(v[2] or '0') + estimate > limit then return i + 1, used + estimate <= limit end
    end
  end
  return 0, false
end

local function reserveSpend(keys, args, firstKey, firstArg, count)
  for i = 0, count - 1 do
    local k, a = keys[firstKey + i], firstArg + i * 5
    rcall('HINCRBYFLOAT', k, args[a] .. '\tr', args[a + 2])
    rcall('PEXPIREAT', k, args[a + 4])
  end
end

-- Ending `count` reservations: for charge i (from
-- 0), keys[firstKey + i] is its record and args[firstArg + 3i ...] its subject, estimate and
-- what the request used (0 when it failed); the estimate leaves reserved, the use joins used.
local function settleSpend(keys, args, firstKey, firstArg, count)
  for i = 0, count - 1 do
    local k, a = keys[firstKey + i], firstArg + i * 3
    rcall('HINCRBYFLOAT', k, args[a] .. '\tr', -tonumber(args[a + 1]))
    if tonumber(args[a + 2]) ~= 0 then rcall('HINCRBYFLOAT', k, args[a] .. '\tu', args[a + 2]) end
  end
end
