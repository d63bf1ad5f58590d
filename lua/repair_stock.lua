-- repair_stock: sets a quantity sale's free-unit counter to the ledger's count, only if it
-- still reads what the drift checker saw (a compare-and-set: a hold or a restore since then
-- leaves it alone, and the next check looks again).
-- KEYS: 1 stock
-- ARGV: 1 the count the checker read, 2 the ledger's count
-- Returns 1 if the counter was set, 0 if it had moved.
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current ~= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
