-- One answered call added to an hour's totals, under device, model and priority. Fields are
-- dimension TAB name TAB metric (r requests, p prompt tokens, c completion tokens, usd cost).
local function addUsage(key, device, model, priority, prompt, completion, usd, keepMs)
  for _, dim in ipairs({ {'d', device}, {'m', model}, {'p', priority} }) do
    local base = dim[1] .. '\t' .. dim[2] .. '\t'
    rcall('HINCRBY', key, base .. 'r', 1)
    rcall('HINCRBY', key, base .. 'p', prompt)
    rcall('HINCRBY', key, base .. 'c', completion)
    rcall('HINCRBYFLOAT', key, base .. 'usd', usd)
  end
  rcall('PEXPIRE', key, keepMs)
end
