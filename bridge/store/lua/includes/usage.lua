-- One answered call added to an hour's totals: one field per (device, model, priority) and
-- metric, device TAB model TAB priority TAB metric (r requests, p prompt tokens, c completion
-- tokens, usd cost), so a call costs three or four increments; a report adds the
-- combinations up by dimension. The hour's key gets its expiry with each new combination.
local function addUsage(key, device, model, priority, prompt, completion, usd, keepMs)
  local base = device .. '\t' .. model .. '\t' .. priority .. '\t'
  if rcall('HINCRBY', key, base .. 'r', 1) == 1 then rcall('PEXPIRE', key, keepMs) end
  rcall('HINCRBY', key, base .. 'p', prompt)
  rcall('HINCRBY', key, base .. 'c', completion)
  if tonumber(usd) ~= 0 then rcall('HINCRBYFLOAT', key, base .. 'usd', usd) end
end
