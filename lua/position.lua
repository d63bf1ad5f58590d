-- position: where an attempt stands, for the status answer. Asking is a sign of life: a
-- waiting attempt's presence is refreshed (when abandonment is tracked).
-- KEYS: 1 meta, 2 queue, 3 owners, 4 active, 5 seen, 6 abandoned (set)
-- ARGV: 1 attempt id
-- Returns {owner or '', position (0 = not queued), waiting, active (1/0),
--          measured admissions per minute, configured rate per minute,
--          known (1/0: the store holds this sale), rebuilt_at_ms (0 = never rebuilt),
--          abandoned (1/0: lost its place for not showing up)}
local owner = redis.call('HGET', KEYS[3], ARGV[1]) or ''
local rank = redis.call('ZRANK', KEYS[2], ARGV[1])
local position = 0
if rank then
  position = rank + 1
  local t = redis.call('TIME')
  redis.call('ZADD', KEYS[5], 'XX', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), ARGV[1])
end
local abandoned = redis.call('SISMEMBER', KEYS[6], ARGV[1])
local active = 0
if redis.call('ZSCORE', KEYS[4], ARGV[1]) then active = 1 end
local measured = redis.call('HGET', KEYS[1], 'measured_rate') or '0'
local rate = redis.call('HGET', KEYS[1], 'rate_per_minute') or '0'
local known = 0
if redis.call('HGET', KEYS[1], 'stock_initialised') then known = 1 end
local rebuilt = redis.call('HGET', KEYS[1], 'rebuilt_at_ms') or '0'
return {owner, position, redis.call('ZCARD', KEYS[2]), active, measured, rate, known, rebuilt,
  abandoned}
