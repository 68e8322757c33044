-- KEYS: all tenants' chunk count, then every tenant's chunk count. Counted once: from then on
-- the flips and removals move it with each tenant's.
--! keys: all_chunks
if redis.call('EXISTS', all_chunks) == 1 then return 0 end
local total = 0
for i = 2, #KEYS do total = total + tonumber(redis.call('GET', KEYS[i]) or '0') end
redis.call('SET', all_chunks, total)
return 1
