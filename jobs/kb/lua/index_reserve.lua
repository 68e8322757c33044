-- KEYS: next chunk id, staged runs, lexical statistics. ARGV: how many ids, now, the reference
-- length for a tenant that has none yet. Reserves a run, marked staged; returns its stop and the
-- tenant's reference length (kept from its first document on: jobs.kb.postings).
--! keys: next_chunk staged stats
--! args: size now reference
local stop = redis.call('INCRBY', next_chunk, size)
redis.call('ZADD', staged, now, (stop - tonumber(size)) .. ':' .. stop)
redis.call('HSETNX', stats, 'reference', reference)
return {stop, redis.call('HGET', stats, 'reference')}
