-- Shared by the postings' append and a piece's write: append chunk ids to a bucket's postings
-- at one level, and keep that bucket's levels hash ("largest tf:shortest chunk" per level).
local function append_group(postings, levels, level, ids, tf, shortest)
  tf, shortest = tonumber(tf), tonumber(shortest)
  redis.call('APPEND', postings, ids)
  local known = redis.call('HGET', levels, level)
  if known then
    local old_tf, old_length = string.match(known, '^(%d+):(%d+)$')
    tf, shortest = math.max(tf, tonumber(old_tf)), math.min(shortest, tonumber(old_length))
  end
  redis.call('HSET', levels, level, string.format('%d:%d', tf, shortest))
end
