-- Moves the count of all tenants together by what a tenant's count moved, once it is counted
-- at all (absent, `ensure_chunk_counts` counts it from the tenants' counts, exactly once).
local function add_to_total(total, chunks)
  if redis.call('EXISTS', total) == 1 then redis.call('INCRBY', total, chunks) end
end
