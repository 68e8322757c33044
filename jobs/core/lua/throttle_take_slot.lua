-- KEYS: the slots. ARGV: the limit, the lease (ms), the token. Returns {1, 0} with the token
-- holding a slot, else {0, ms until the first lease ends}.
--! keys: slots
--! args: limit lease_ms token
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', slots, '-inf', now)
if redis.call('ZCARD', slots) >= tonumber(limit) then
  local first = redis.call('ZRANGE', slots, 0, 0, 'WITHSCORES')
  return {0, math.max(1, math.floor(tonumber(first[2]) - now))}
end
redis.call('ZADD', slots, now + tonumber(lease_ms), token)
redis.call('PEXPIRE', slots, lease_ms)
return {1, 0}
