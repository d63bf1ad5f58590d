-- join: put a user in a sale's queue, idempotently per user.
-- KEYS: 1 meta (hash), 2 seq (counter), 3 gone (zset), 4 users (hash user -> admitted
--       attempt), 5 active (zset), 6 seen (zset waiting serial -> last sign of life, ms; only
--       when abandonment is on)
-- ARGV: 1 user id, 2 attempt id (32 hex) to use if the user has no live attempt, 3 now (ms),
--       4 '1' to track presence for abandonment
-- Returns {status, attempt, position, waiting, measured rate, configured rate}; status is
--   queued | active (already admitted: position 0) | unknown (no such sale) | closed
-- (the rates, admissions per minute, give the expected wait without a second call)
-- A sale whose stock was never written here (unknown, or lost in a flush) is unknown: the
-- caller restores it from the ledger.
local meta = redis.call('HMGET', KEYS[1], 'stock_initialised', 'status', 'closes_at_ms', 'head',
  'measured_rate', 'rate_per_minute')
if not meta[1] then return {'unknown', '', 0, 0, 0, 0} end
local closes_at = tonumber(meta[3] or '0')
if meta[2] == 'closed' or (closes_at > 0 and tonumber(ARGV[3]) >= closes_at) then
  return {'closed', '', 0, 0, 0, 0}
end
local head = head_of(meta[4])
local user = ARGV[1]
local attempt, serial = waiting_entry(user)
if not attempt then
  local admitted = redis.call('HGET', KEYS[4], user)
  if admitted and redis.call('ZSCORE', KEYS[5], admitted) then
    return {'active', admitted, 0, waiting_count(head, KEYS[2], KEYS[3]), 0, 0}
  end
  -- The serial is a service-issued sequence, never a clock: FIFO even across replicas.
  attempt, serial = ARGV[2], redis.call('INCR', KEYS[2])
  put_waiting(user, attempt, serial)
end
if ARGV[4] == '1' then redis.call('ZADD', KEYS[6], ARGV[3], serial) end
return {'queued', attempt, position_of(head, serial, KEYS[3]), waiting_count(head, KEYS[2], KEYS[3]),
  meta[5] or '0', meta[6] or '0'}
