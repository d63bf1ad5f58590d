-- join: put users in a sale's queue, idempotently per user. Joins that arrive together are
-- made together (src/queue/redis_batches.rs), in order, as if one after the other: a user who
-- joins twice in one call gets the same attempt twice.
-- KEYS: 1 meta (hash), 2 seq (counter), 3 gone (zset), 4 users (hash user -> admitted
--       attempt), 5 active (zset), 6 seen (zset waiting serial -> last sign of life, ms; only
--       when abandonment is on)
-- ARGV: 1 '1' to track presence for abandonment, then for each join: user id, attempt id
--       (32 hex) to use if the user has no live attempt, now (ms)
-- Returns six values per join, in order: status, attempt, position, waiting, measured rate,
--   configured rate; status is queued | active (already admitted: position 0) | unknown (no
--   such sale) | closed
-- (the rates, admissions per minute, give the expected wait without a second call)
-- A sale whose stock was never written here (unknown, or lost in a flush) is unknown: the
-- caller restores it from the ledger.
local meta = redis.call('HMGET', KEYS[1], 'stock_initialised', 'status', 'closes_at_ms', 'head',
  'measured_rate', 'rate_per_minute')
local closes_at = tonumber(meta[3] or '0')
local head = head_of(meta[4])
local reply = {}

local function answer(status, attempt, position, waiting, measured, configured)
  local n = #reply
  reply[n + 1], reply[n + 2], reply[n + 3] = status, attempt, position
  reply[n + 4], reply[n + 5], reply[n + 6] = waiting, measured, configured
end

local function join(user, fresh, now)
  if not meta[1] then return answer('unknown', '', 0, 0, 0, 0) end
  if meta[2] == 'closed' or (closes_at > 0 and tonumber(now) >= closes_at) then
    return answer('closed', '', 0, 0, 0, 0)
  end
  local attempt, serial = waiting_entry(user)
  if not attempt then
    local admitted = redis.call('HGET', KEYS[4], user)
    if admitted and redis.call('ZSCORE', KEYS[5], admitted) then
      return answer('active', admitted, 0, waiting_count(head, KEYS[2], KEYS[3]), 0, 0)
    end
    -- The serial is a service-issued sequence, never a clock: FIFO even across replicas.
    attempt, serial = fresh, redis.call('INCR', KEYS[2])
    put_waiting(user, attempt, serial)
  end
  if ARGV[1] == '1' then redis.call('ZADD', KEYS[6], now, serial) end
  answer('queued', attempt, position_of(head, serial, KEYS[3]),
    waiting_count(head, KEYS[2], KEYS[3]), meta[5] or '0', meta[6] or '0')
end

for i = 2, #ARGV, 3 do
  join(ARGV[i], ARGV[i + 1], ARGV[i + 2])
end
return reply
