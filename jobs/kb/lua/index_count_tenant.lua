-- KEYS: tenant's chunk count, all tenants' chunk count. ARGV: the tenant's chunks, counted from
-- its documents. A tenant counted for the first time adds what it holds to the total.
--! keys: tenant_chunks all_chunks
--! args: chunks
--! include: index_total
if redis.call('EXISTS', tenant_chunks) == 1 then return 0 end
redis.call('SET', tenant_chunks, chunks)
add_to_total(all_chunks, tonumber(chunks))
return 1
