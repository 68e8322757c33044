-- KEYS: per group, a bucket's postings at one level and that bucket's levels (a hash: level →
-- "largest tf:shortest chunk" of its postings). ARGV: per group, the level, the chunk ids to
-- append, their largest tf and their shortest chunk.
--! include: index_postings
for i = 1, #KEYS, 2 do
  local g = (i - 1) * 2 + 1
  append_group(KEYS[i], KEYS[i + 1], ARGV[g], ARGV[g + 1], ARGV[g + 2], ARGV[g + 3])
end
