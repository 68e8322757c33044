-- KEYS: the step histogram hash. ARGV: n, then n pairs (sum field, seconds), then the bucket
-- fields to add one to. One command instead of one per bucket: a fast step fills every bucket.
--! keys: histogram
--! args: sums
local n = tonumber(sums)
for i = 0, n - 1 do redis.call('HINCRBYFLOAT', histogram, ARGV[2 + 2 * i], ARGV[3 + 2 * i]) end
for i = 2 + 2 * n, #ARGV do redis.call('HINCRBY', histogram, ARGV[i], 1) end
return n
