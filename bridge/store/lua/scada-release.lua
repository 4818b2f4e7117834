--[[ scada-release: gives an Edge Node's publisher lease up, if `owner` holds it.
KEYS[1] scada:lease:{node}  ARGV[1] owner
]]
if rcall('GET', KEYS[1]) == ARGV[1] then rcall('DEL', KEYS[1]) end
return 1
