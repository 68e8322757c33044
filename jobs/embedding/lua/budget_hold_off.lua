-- KEYS: the pause. ARGV: ms, what asked for it. The longest pause asked for wins.
--! keys: pause
--! args: ms asked_by
if redis.call('PTTL', pause) < tonumber(ms) then
  redis.call('SET', pause, asked_by, 'PX', ms)
end
return 0
