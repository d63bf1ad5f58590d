-- join: put a user in a sale's queue, idempotently per user.
-- KEYS: 1 meta (hash), 2 queue (zset attempt -> seq), 3 seq (counter),
--       4 users (hash user -> attempt), 5 owners (hash attempt -> user), 6 active (zset),
--       7 seen (zset waiting attempt -> last sign of life, ms; only when abandonment is on)
-- ARGV: 1 user id, 2 attempt id to use if the user has no live attempt, 3 now (ms),
--       4 '1' to track presence for abandonment
-- Returns {status, attempt, position, waiting, measured rate, configured rate}; status is
--   queued | active (already admitted: position 0) | unknown (no such sale) | closed
-- (the rates, admissions per minute, give the expected wait without a second call)
-- A sale whose stock was never written here (unknown, or lost in a flush) is unknown: the
-- caller restores it from the ledger.
if not redis.call('HGET', KEYS[1], 'stock_initialised') then return {'unknown', '', 0, 0, 0, 0} end
local status = redis.call('HGET', KEYS[1], 'status')
local closes_at = tonumber(redis.call('HGET', KEYS[1], 'closes_at_ms') or '0')
if status == 'closed' or (closes_at > 0 and tonumber(ARGV[3]) >= closes_at) then
  return {'closed', '', 0, 0, 0, 0}
end
local existing = redis.call('HGET', KEYS[4], ARGV[1])
if existing then
  local rank = redis.call('ZRANK', KEYS[2], existing)
  if rank then
    if ARGV[4] == '1' then redis.call('ZADD', KEYS[7], ARGV[3], existing) end
    local rates = redis.call('HMGET', KEYS[1], 'measured_rate', 'rate_per_minute')
    return {'queued', existing, rank + 1, redis.call('ZCARD', KEYS[2]), rates[1] or '0', rates[2] or '0'}
  end
  if redis.call('ZSCORE', KEYS[6], existing) then
    return {'active', existing, 0, redis.call('ZCARD', KEYS[2]), 0, 0}
  end
end
-- The score is a service-issued sequence, never a clock: FIFO even across replicas.
local seq = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[2], seq, ARGV[2])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[5], ARGV[2], ARGV[1])
if ARGV[4] == '1' then redis.call('ZADD', KEYS[7], ARGV[3], ARGV[2]) end
local rank = redis.call('ZRANK', KEYS[2], ARGV[2])
local rates = redis.call('HMGET', KEYS[1], 'measured_rate', 'rate_per_minute')
return {'queued', ARGV[2], rank + 1, redis.call('ZCARD', KEYS[2]), rates[1] or '0', rates[2] or '0'}
