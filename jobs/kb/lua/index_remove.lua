-- Keys as index_flip.lua's, and the tenant's next chunk id. tombstone_ttl: '', or how long a
-- tombstone stays: the document's hash then keeps `deleted_below` (the next chunk id), which
-- refuses the flip of any run staged before this delete (the knowledge base on a Redis of its
-- own: jobs.kb.pending_flips). A document indexed before chunk ids existed has only its hash.
-- Returns 1 when there was a document.
--! keys: doc docs generation tenant_chunks live staged garbage all_chunks next_chunk
--! args: tombstone_ttl
--! include: index_runs
--! include: index_total
local current = redis.call('HMGET', doc, 'chunks', 'texts', 'first', 'stop',
                           'deleted_below')
local removed = 0
if redis.call('EXISTS', doc) == 1 and not current[5] then
  local chunks = tonumber(current[1] or '0')
  if not current[1] and current[2] then chunks = #cjson.decode(current[2]) end
  if current[3] then retire(live, garbage, current[3], current[4]) end
  redis.call('DEL', doc)
  redis.call('SREM', docs, doc)
  redis.call('INCR', generation)
  redis.call('DECRBY', tenant_chunks, chunks)
  add_to_total(all_chunks, -chunks)
  removed = 1
end
if tombstone_ttl ~= '' then
  redis.call('HSET', doc, 'deleted_below', redis.call('GET', next_chunk) or '0')
  redis.call('EXPIRE', doc, tombstone_ttl)
end
return removed
