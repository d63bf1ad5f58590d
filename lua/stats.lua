-- stats: a sale's counters.
-- KEYS: 1 meta, 2 seq, 3 gone, 4 active, 5 stock, 6 seats
-- ARGV: none
-- REPLY: waiting, active, remaining, known, version
-- Returns {waiting, active, remaining units or free seats, known (1/0: the store holds this
--          sale; its counters are zero when not), meta.version}
local meta = redis.call('HMGET', KEYS[1], 'kind', 'stock_initialised', 'head', 'version')
local remaining
if meta[1] == 'seats' then
  remaining = redis.call('SCARD', KEYS[6])
else
  remaining = math.max(tonumber(redis.call('GET', KEYS[5]) or '0'), 0)
end
local known = 0
if meta[2] then known = 1 end
return {waiting_count(head_of(meta[3]), KEYS[2], KEYS[3]), redis.call('ZCARD', KEYS[4]), remaining,
  known, tonumber(meta[4] or '0')}
