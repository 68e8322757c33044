-- One piece of a document's lexical entries, all or nothing: its rows (and texts), the tenant's
-- statistics they add to, and, for a small document, its postings. One script rather than a
-- MULTI so that a NOSCRIPT (a restart, a failover) leaves nothing done and the call is sent
-- again whole, without asking SCRIPT EXISTS first (jobs.core.scripts.send).
-- KEYS: the rows and texts hashes, document frequencies, lexical statistics, then per group of
-- postings (a bucket's postings at one level, that bucket's levels). ARGV: the piece's length,
-- how many rows (its chunks), texts and terms follow, then (chunk id, row) pairs, (chunk id,
-- text) pairs, (bucket name, chunks) pairs and per group (level, ids, largest tf, shortest
-- chunk).
--! keys: rows texts frequencies stats
--! args: length row_count text_count term_count
--! include: index_postings
local at = 5

local function hset_pairs(key, count)
  local stop = at + 2 * count
  while at < stop do  -- HSET in batches: unpack has a bound on its values
    local last = math.min(at + 999, stop - 1)
    redis.call('HSET', key, unpack(ARGV, at, last))
    at = last + 1
  end
end

hset_pairs(rows, tonumber(row_count))
hset_pairs(texts, tonumber(text_count))
redis.call('HINCRBY', stats, 'chunks', tonumber(row_count))
redis.call('HINCRBY', stats, 'length', tonumber(length))
for i = at, at + 2 * tonumber(term_count) - 1, 2 do
  redis.call('HINCRBY', frequencies, ARGV[i], tonumber(ARGV[i + 1]))
end
at = at + 2 * tonumber(term_count)
for k = 5, #KEYS, 2 do
  append_group(KEYS[k], KEYS[k + 1], ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3])
  at = at + 4
end
