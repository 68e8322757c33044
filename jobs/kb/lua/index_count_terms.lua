-- KEYS: document frequencies, lexical statistics. ARGV: sign (1 or -1), chunks, length, then
-- (bucket name, chunks) pairs. Moves the statistics by chunks written or deleted; a term in no
-- chunk any more leaves the hash.
--! keys: frequencies stats
--! args: direction chunks length
local sign = tonumber(direction)
redis.call('HINCRBY', stats, 'chunks', sign * tonumber(chunks))
redis.call('HINCRBY', stats, 'length', sign * tonumber(length))
for i = 4, #ARGV, 2 do
  if redis.call('HINCRBY', frequencies, ARGV[i], sign * tonumber(ARGV[i + 1])) <= 0 then
    redis.call('HDEL', frequencies, ARGV[i])
  end
end
