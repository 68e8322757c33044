-- KEYS: 1 a tenant's documents, then the document's keys that must all be gone (its latest
-- task; its indexed entry, when the knowledge base is on this Redis). ARGV: 1 the document's
-- id. Takes it out of the set only while nothing names it; returns 1 when it did.
--! keys: documents
--! args: document_id
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then return 0 end
end
return redis.call('ZREM', documents, document_id)
