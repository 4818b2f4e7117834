--[[ budget-settle: ends reservations of a request that never became a job (includes/spend.lua).
KEYS[i] spend:{budget}:{period}, one per charge
ARGV, per charge (3 each): subject, estimate, used
]]
--- @include "spend"

settleSpend(KEYS, ARGV, 1, 1, #KEYS)
return 1
