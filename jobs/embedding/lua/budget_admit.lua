-- KEYS: the window log, the holders, the pause, the batch limit. ARGV: rpm, concurrency,
-- lease ms, window ms, token. Returns {1, 0, '', batch limit, ''} when the request may go (it is
-- logged and holds a slot), else {0, wait ms, reason ('pause' | 'rpm' | 'concurrency'), 0,
-- what asked for the pause}.
--! keys: log holders pause batch_limit
--! args: rpm_limit concurrency_limit lease_ms window_ms token
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local paused = redis.call('PTTL', pause)
if paused > 0 then return {0, paused, 'pause', 0, redis.call('GET', pause) or ''} end
local rpm, concurrency = tonumber(rpm_limit), tonumber(concurrency_limit)
local lease, window = tonumber(lease_ms), tonumber(window_ms)
if rpm > 0 then
  redis.call('ZREMRANGEBYSCORE', log, '-inf', now - window)
  if redis.call('ZCARD', log) >= rpm then
    local oldest = redis.call('ZRANGE', log, 0, 0, 'WITHSCORES')
    return {0, math.max(1, math.floor(tonumber(oldest[2]) + window - now)), 'rpm', 0, ''}
  end
end
if concurrency > 0 then
  redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
  if redis.call('ZCARD', holders) >= concurrency then
    local first = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
    return {0, math.max(1, math.floor(tonumber(first[2]) - now)), 'concurrency', 0, ''}
  end
end
if rpm > 0 then
  redis.call('ZADD', log, now, token)
  redis.call('PEXPIRE', log, window)
end
if concurrency > 0 then
  redis.call('ZADD', holders, now + lease, token)
  redis.call('PEXPIRE', holders, lease)
end
return {1, 0, '', tonumber(redis.call('GET', batch_limit) or '0'), ''}
