-- KEYS: tenant's sizes, tenant's counter. ARGV: task id, size, … Counted once: HSETNX.
--! keys: sizes counter
local added = 0
for i = 1, #ARGV, 2 do
  if redis.call('HSETNX', sizes, ARGV[i], ARGV[i + 1]) == 1 then
    added = added + tonumber(ARGV[i + 1])
  end
end
if added > 0 then redis.call('INCRBY', counter, added) end
return added
