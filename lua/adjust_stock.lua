-- adjust_stock: an operator's change to a sale's stock, after the ledger committed it: units
-- added to or withdrawn from the free counter, or seats added to or taken from the free set.
-- A store with no stock for the sale (keys lost) is left alone: its rebuild reads the ledger.
-- KEYS: as lua/lib/changes.lua
-- ARGV: change, amount...
-- REPLY: applied
-- Arguments: 1 change ('add' | 'withdraw' | 'add_seats' | 'withdraw_seats'), then the number of
--       units, or the seats
-- Returns 1 if applied, 0 if the store holds no stock for the sale.
if redis.call('HGET', KEYS[1], 'stock_initialised') ~= '1' then return 0 end
local change = ARGV[1]
if change == 'add' then
  redis.call('INCRBY', KEYS[3], tonumber(ARGV[2]))
elseif change == 'withdraw' then
  redis.call('DECRBY', KEYS[3], tonumber(ARGV[2]))
elseif change == 'add_seats' or change == 'withdraw_seats' then
  local op = change == 'add_seats' and 'SADD' or 'SREM'
  for i = 2, #ARGV, 5000 do
    redis.call(op, KEYS[4], unpack(ARGV, i, math.min(i + 4999, #ARGV)))
  end
  bump_version()
  log_seats(KEYS[1], KEYS[8], change == 'add_seats' and 'f' or 'x', table.concat(ARGV, ',', 2))
  return 1
else
  return redis.error_reply('unknown stock change ' .. change)
end
bump_version()
return 1
