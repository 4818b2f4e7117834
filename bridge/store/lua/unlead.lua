--[[ unlead: the leader is done; only the leader may end its flight.
KEYS[1] the flight's key (its cache key: cache:{hash})  ARGV[1] job key
]]
--- @include "flight"
endFlight(KEYS[1], ARGV[1])
return 1
