-- KEYS: staged runs, garbage runs. ARGV: run.
--! keys: staged garbage
--! args: run
if redis.call('ZREM', staged, run) == 1 then redis.call('RPUSH', garbage, run) end
