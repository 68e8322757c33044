-- The part every script below shares: `record(key, recent, id, type, subject, fields, later)`
-- writes an event once (a re-sent script finds it and writes nothing) and indexes it for its
-- tenant (`later`: seconds added to its place in the index, so a batch's event lists after the
-- task event that completed it).
-- Its includers' first five ARGV: tenant created_at now_score ttl_seconds keep_count.
local now, ttl, keep = tonumber(now_score), tonumber(ttl_seconds), tonumber(keep_count)
local function record(key, recent, id, kind, subject, fields, later)
  if redis.call('EXISTS', key) == 1 then return false end
  redis.call('HSET', key, 'id', id, 'type', kind, 'tenant', tenant, 'created_at', created_at,
             'subject', subject, 'status', 'pending', 'attempts', 0, unpack(fields))
  redis.call('EXPIRE', key, ttl)
  redis.call('ZADD', recent, now + (later or 0), id)
  redis.call('ZREMRANGEBYSCORE', recent, '-inf', now - ttl)
  redis.call('ZREMRANGEBYRANK', recent, 0, -keep - 1)
  redis.call('EXPIRE', recent, ttl)
  return true
end
