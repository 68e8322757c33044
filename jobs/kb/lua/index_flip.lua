-- The switch to a staged version: doc, the document's hash; docs, the tenant's document set;
-- live, the live bitmap; staged and garbage, the runs staged and dead. vector_store: 'store' |
-- 'none'; run: "first:stop"; keep: '1' leaves the fields of the layout before chunk ids in the
-- hash, for web processes of that version (a migration).
-- Refused (0) when a newer version is indexed, or when the document was deleted after this run
-- was staged (a tombstone: chunk ids below `deleted_below` were reserved before the delete).
--! keys: doc docs generation tenant_chunks live staged garbage all_chunks
--! args: version task_id document_id filename chunks first stop format dim vector_store run
--! args: keep
--! include: index_runs
--! include: index_total
local current = redis.call('HMGET', doc, 'version', 'chunks', 'texts', 'first', 'stop',
                           'deleted_below')
if current[4] == first then return 1 end  -- this very flip, sent again
if (current[1] and tonumber(current[1]) > tonumber(version))
    or (current[6] and tonumber(first) < tonumber(current[6])) then
  if redis.call('ZREM', staged, run) == 1 then redis.call('RPUSH', garbage, run) end
  return 0
end
local before = tonumber(current[2] or '0')
if current[1] and not current[2] and current[3] then before = #cjson.decode(current[3]) end
if current[4] then retire(live, garbage, current[4], current[5]) end
set_run(live, tonumber(first), tonumber(stop), '\255')
redis.call('ZREM', staged, run)
if keep ~= '1' then redis.call('DEL', doc) end
redis.call('HSET', doc, 'version', version, 'task_id', task_id, 'document_id', document_id,
           'filename', filename, 'chunks', chunks, 'first', first, 'stop', stop,
           'format', format, 'dim', dim, 'vector_store', vector_store, 'lexical', 'bm25')
redis.call('SADD', docs, doc)
redis.call('INCR', generation)
redis.call('INCRBY', tenant_chunks, tonumber(chunks) - before)
add_to_total(all_chunks, tonumber(chunks) - before)
return 1
