-- KEYS: tenant sizes, tenant bytes, all bytes. ARGV: task key prefix, how many live statuses,
-- those statuses. Reservations of tasks no longer live (or gone) are given back; the shared
-- counter moves by the same amount, in the same script.
--! keys: sizes tenant_bytes all_bytes
--! args: task_prefix live_count
local live = {}
for i = 3, 2 + tonumber(live_count) do live[ARGV[i]] = true end
local entries = redis.call('HGETALL', sizes)
local total = 0
for i = 1, #entries, 2 do
  local status = redis.call('HGET', task_prefix .. entries[i], {{STATUS}})
  if status and live[status] then
    total = total + tonumber(entries[i + 1])
  else
    redis.call('HDEL', sizes, entries[i])
  end
end
local old = tonumber(redis.call('GET', tenant_bytes) or '0')
redis.call('SET', tenant_bytes, total)
redis.call('INCRBY', all_bytes, total - old)
return total
