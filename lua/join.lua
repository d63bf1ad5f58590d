-- join: put users in a sale's queue, idempotently per user. Joins that arrive together are
-- made together (src/queue/redis_batches.rs), in order, as if one after the other: a user who
-- joins twice in one call gets the same attempt twice.
-- KEYS: 1 meta (hash), 2 seq (counter), 3 gone (zset), 4 users (hash user -> admitted
--       attempt), 5 active (zset), 6 seen (zset waiting serial -> last sign of life, ms; only
--       when abandonment is on), 7 bought (hash user -> units held or bought)
-- ARGV: presence, join...: [user, attempt, now_ms]
-- REPLY: join...: [status, attempt, position, waiting, measured_rate, configured_rate, serial, epoch]
-- Arguments: 1 '1' to track presence for abandonment, then for each join: user id, attempt id
--       (32 hex) to use if the user has no live attempt, now (ms)
-- Returns eight values per join, in order: status, attempt, position, waiting, measured rate,
--   configured rate, serial (0 unless queued), the line's epoch (meta.epoch); status is queued | active (already admitted, or bought: position 0) |
--   unknown (no such sale) | closed
-- One attempt per user per sale: a user whose admitted attempt bought (it left the active set
-- with units still counted to the user) gets that attempt back, not a new place in line; one
-- whose attempt expired (units given back, or none taken) joins anew.
-- (the rates, admissions per minute, give the expected wait without a second call)
-- A sale whose stock was never written here (unknown, or lost in a flush) is unknown: the
-- caller restores it from the ledger.
local meta = redis.call('HMGET', KEYS[1], 'stock_initialised', 'status', 'closes_at_ms', 'head',
  'measured_rate', 'rate_per_minute', 'epoch', 'drawing', 'draw_to')
local closes_at = tonumber(meta[3] or '0')
-- While the lottery's draw gives the places up to draw_to out again, such a serial may name
-- another user by now: no sign of life is written for it (lua/lottery.lua).
local drawn_to = meta[8] and tonumber(meta[9]) or -1
local head = head_of(meta[4])
local reply, n = {}, 0
-- (inline, no helper functions: a script's functions are made anew on every call)
for i = 2, #ARGV, 3 do
  local user, now = ARGV[i], ARGV[i + 2]
  local status, attempt, position, waiting, measured, configured = 'unknown', '', 0, 0, 0, 0
  local place = 0
  if not meta[1] then
    status = 'unknown'
  elseif meta[2] == 'closed' or (closes_at > 0 and tonumber(now) >= closes_at) then
    status = 'closed'
  else
    local serial, admitted
    attempt, serial = waiting_entry(user, head)
    if not attempt then
      admitted = redis.call('HGET', KEYS[4], user)
      if admitted and not redis.call('ZSCORE', KEYS[5], admitted)
          and tonumber(redis.call('HGET', KEYS[7], user) or '0') == 0 then
        admitted = nil
      end
    end
    if admitted then
      status, attempt, waiting = 'active', admitted, waiting_count(head, KEYS[2], KEYS[3])
    else
      if not attempt then
        -- The serial is a service-issued sequence, never a clock: FIFO even across replicas.
        attempt, serial = ARGV[i + 1], redis.call('INCR', KEYS[2])
        put_waiting(user, attempt, serial)
      end
      if ARGV[1] == '1' and serial > drawn_to then redis.call('ZADD', KEYS[6], now, serial) end
      status, position, place = 'queued', position_of(head, serial, KEYS[3]), serial
      waiting, measured, configured = waiting_count(head, KEYS[2], KEYS[3]), meta[5] or '0',
        meta[6] or '0'
    end
  end
  reply[n + 1], reply[n + 2], reply[n + 3] = status, attempt, position
  reply[n + 4], reply[n + 5], reply[n + 6] = waiting, measured, configured
  reply[n + 7], reply[n + 8] = place, meta[7] or ''
  n = n + 8
end
return reply
