-- init_sale: write a sale's settings and, if they are not there yet, its stock.
-- KEYS: 1 meta, 2 stock, 3 seats
-- ARGV: 1 status, 2 opens_at ms, 3 closes_at ms (0 = none), 4 max_active, 5 per_user_limit,
--       6 rate_per_minute, 7 kind, 8 hold_ttl_ms, 9 payment_ttl_ms, 10 quantity, 11.. seat ids
-- The stock given is what is free now (the ledger's view), so this also rebuilds a flushed sale.
-- Returns 1 if the stock was written, 0 if it already existed (settings are always updated).
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'opens_at_ms', ARGV[2], 'closes_at_ms', ARGV[3],
  'max_active', ARGV[4], 'per_user_limit', ARGV[5], 'rate_per_minute', ARGV[6], 'kind', ARGV[7], 'hold_ttl_ms', ARGV[8], 'payment_ttl_ms', ARGV[9])
if redis.call('HSETNX', KEYS[1], 'stock_initialised', '1') == 0 then return 0 end
if ARGV[7] == 'quantity' then
  redis.call('SET', KEYS[2], ARGV[10])
else
  for i = 11, #ARGV, 5000 do
    redis.call('SADD', KEYS[3], unpack(ARGV, i, math.min(i + 4999, #ARGV)))
  end
end
return 1
