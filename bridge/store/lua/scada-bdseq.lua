--[[ scada-bdseq: an Edge Node's next bdSeq, 0 to 255 and around again; kept without expiry
(one small key per node) so a restart or another instance goes on from it.
KEYS[1] scada:bdseq:{node}
]]
local last = tonumber(rcall('GET', KEYS[1]))
local nextSeq = last and (last + 1) % 256 or 0
rcall('SET', KEYS[1], nextSeq)
return nextSeq
