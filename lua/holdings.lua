-- holdings: what the store holds of a sale besides its queue, for the drift checker to
-- compare with the ledger's snapshot: the free stock, the active set, the holds, the units
-- per user, the admission batch not yet recorded, and meta.version (read again after the
-- ledger: a change in between means the two reads are not of the same moment).
-- KEYS: 1 meta, 2 stock, 3 seats, 4 active, 5 holds, 6 bought, 7 unrecorded
-- Returns {known (1/0), version, kind, free units (quantity sales), {free seats},
--          {active attempt, ...}, {attempt, hold record, ...}, {user, units, ...},
--          {unrecorded: attempt, serial, user, deadline, ...}}
local meta = redis.call('HMGET', KEYS[1], 'stock_initialised', 'version', 'kind')
if not meta[1] then return {0, 0, '', 0, {}, {}, {}, {}, {}} end
local seats = {}
if meta[3] == 'seats' then seats = redis.call('SMEMBERS', KEYS[3]) end
return {1, tonumber(meta[2] or '0'), meta[3] or 'quantity', tonumber(redis.call('GET', KEYS[2]) or '0'), seats,
  redis.call('ZRANGE', KEYS[4], 0, -1), redis.call('HGETALL', KEYS[5]),
  redis.call('HGETALL', KEYS[6]), redis.call('LRANGE', KEYS[7], 0, -1)}
