-- KEYS: tenant's chunk count, document hash, all tenants' chunk count. What the tenant holds,
-- the document's own indexed version (counted from its texts where it was indexed before counts
-- were kept), and what all tenants hold.
--! keys: tenant_chunks doc all_chunks
local current = redis.call('HMGET', doc, 'chunks', 'texts')
local previous = tonumber(current[1] or '0')
if not current[1] and current[2] then previous = #cjson.decode(current[2]) end
return {tonumber(redis.call('GET', tenant_chunks) or '0'), previous,
        tonumber(redis.call('GET', all_chunks) or '0')}
