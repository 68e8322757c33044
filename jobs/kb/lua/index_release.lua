-- KEYS: a lock. ARGV: its holder's token. Frees the lock if this holder still has it.
--! keys: lock
--! args: token
if redis.call('GET', lock) == token then redis.call('DEL', lock) end
