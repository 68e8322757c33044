-- KEYS: 1 a tenant's documents, then keys of the document one of which must exist (none
-- given: nothing to check). ARGV: 1 the score, 2 the document's id. Adds a document not in the
-- set yet (one in it was placed by an upload, which knows better); returns 1 when it did.
--! keys: documents
--! args: score document_id
local known = #KEYS == 1
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then known = true end
end
if not known then return 0 end
return redis.call('ZADD', documents, 'NX', score, document_id)
