-- KEYS: per group, a bucket's postings at one level and that bucket's levels (a hash: level →
-- "largest tf:shortest chunk" of its postings). ARGV: per group, the level, the chunk ids to
-- append, their largest tf and their shortest chunk.
for i = 1, #KEYS, 2 do
  local g = (i - 1) * 2 + 1
  local level, tf, length = ARGV[g], tonumber(ARGV[g + 2]), tonumber(ARGV[g + 3])
  redis.call('APPEND', KEYS[i], ARGV[g + 1])
  local known = redis.call('HGET', KEYS[i + 1], level)
  if known then
    local old_tf, old_length = string.match(known, '^(%d+):(%d+)$')
    tf, length = math.max(tf, tonumber(old_tf)), math.min(length, tonumber(old_length))
  end
  redis.call('HSET', KEYS[i + 1], level, string.format('%d:%d', tf, length))
end
