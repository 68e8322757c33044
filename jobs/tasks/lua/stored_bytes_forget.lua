-- KEYS: tenant's sizes, tenant's counter. ARGV: task ids. Given back once however often it runs.
--! keys: sizes counter
local freed = 0
for _, id in ipairs(ARGV) do
  local size = redis.call('HGET', sizes, id)
  if size then
    redis.call('HDEL', sizes, id)
    freed = freed + tonumber(size)
  end
end
if freed > 0 then redis.call('DECRBY', counter, freed) end
return freed
