-- join: put users in a sale's queue, idempotently per user. Joins that arrive together are
-- made together (src/queue/redis_batches.rs), in order, as if one after the other: a user who
-- joins twice in one call gets the same attempt twice.
-- KEYS: 1 meta (hash), 2 seq (counter), 3 gone (zset), 4 users (hash user -> admitted
--       attempt), 5 active (zset), 6 seen (zset waiting serial -> last sign of life, ms; only
--       when abandonment is on), 7 bought (hash user -> units held or bought)
-- ARGV: presence, now_ms, join...: [user, attempt, bucket_key]
-- REPLY: measured_rate, configured_rate, epoch, join...: [status, attempt, position, waiting, serial]
-- Arguments: 1 '1' to track presence for abandonment, 2 now (ms, the joins'), then for each
--       join: user id, attempt id (32 hex) to use if the user has no live attempt, the key of
--       the user's bucket in a line of layout 2 (lib/queue.lua's user_bucket, computed by the
--       caller; '' to compute it here)
-- Returns the sale's admission rates and the line's epoch (meta.epoch) once, then five values
--   per join, in order: status, attempt ('' when it is the one sent), position, waiting,
--   serial (0 unless queued); status is queued | active (already admitted, or bought:
--   position 0) | unknown (no such sale) | closed
-- One attempt per user per sale: a user whose admitted attempt bought (it left the active set
-- with units still counted to the user) gets that attempt back, not a new place in line; one
-- whose attempt expired (units given back, or none taken) joins anew.
-- (the rates, admissions per minute, give the expected wait without a second call)
-- A sale whose stock was never written here (unknown, or lost in a flush) is unknown: the
-- caller restores it from the ledger.
local meta = redis.call('HMGET', KEYS[1], 'stock_initialised', 'status', 'closes_at_ms', 'head',
  'measured_rate', 'rate_per_minute', 'epoch', 'drawing', 'draw_to', 'layout')
local closes_at = tonumber(meta[3] or '0')
local reply, n = {meta[5] or '0', meta[6] or '0', meta[7] or ''}, 3
local now = ARGV[2]
-- A sale unknown here or closed answers every join of the call alike.
local shut = (not meta[1] and 'unknown')
  or ((meta[2] == 'closed' or (closes_at > 0 and tonumber(now) >= closes_at)) and 'closed')
if shut then
  for _ = 3, #ARGV, 3 do
    reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4], reply[n + 5] = shut, '', 0, 0, 0
    n = n + 5
  end
  return reply
end
-- While the lottery's draw gives the places up to draw_to out again, such a serial may name
-- another user by now: no sign of life is written for it (lua/lottery.lua).
local drawn_to = meta[8] and tonumber(meta[9]) or -1
local head = head_of(meta[4])
-- (lib/queue.lua's layout(), read with meta rather than on its own)
line_layout = meta[10] or '1'
-- In a line of layout 2 the caller's bucket key is the user's, and a user with no entry in
-- it is not admitted (lib/queue.lua); in an older line the script finds the bucket and asks.
local sent_buckets = line_layout == LAYOUT
-- The line's figures, read once and carried through the joins: the last serial (taken in one
-- write at the end, not an INCR a join) and how many left out of turn (no join changes it).
local last = last_serial(KEYS[2])
local gone = redis.call('ZCARD', KEYS[3])
local first_new
-- The new serials' names (serial, user, ...) and the signs of life (ms, serial, ...), each
-- written once at the end.
local names, seen, named, seens = {}, {}, 0, 0
local presence = ARGV[1] == '1'
-- (inline, no helper functions: a script's functions are made anew on every call)
for i = 3, #ARGV, 3 do
  local user, sent = ARGV[i], ARGV[i + 1]
  local attempt, place, serial, stale, admitted
  -- A new user's place is taken in one write (no lookup first); a user already in the
  -- bucket is read instead. An entry below the head waits no more (see waiting_entry).
  local bucket = (sent_buckets and ARGV[i + 2] ~= '') and ARGV[i + 2] or user_bucket(user)
  local value = waiting_value(sent, last + 1)
  local new = redis.call('HSETNX', bucket, user, value) == 1
  if not new then
    -- Waiting, or (serial below the head) admitted or let go.
    attempt, serial = parse_waiting(redis.call('HGET', bucket, user))
    if serial < head then attempt, serial, stale = nil, nil, true end
  end
  if stale or (new and not sent_buckets) then
    admitted = redis.call('HGET', KEYS[4], user)
    if admitted and not redis.call('ZSCORE', KEYS[5], admitted)
        and tonumber(redis.call('HGET', KEYS[7], user) or '0') == 0 then
      admitted = nil
    end
  end
  if admitted then
    -- Not waiting: the place just taken is given back.
    if not stale then redis.call('HDEL', bucket, user) end
    reply[n + 1], reply[n + 2], reply[n + 3] = 'active', admitted == sent and '' or admitted, 0
    place = 0
  else
    if not attempt then
      -- The serial is a service-issued sequence, never a clock: FIFO even across replicas.
      last = last + 1
      attempt, serial = sent, last
      if stale then redis.call('HSET', bucket, user, value) end
      first_new = first_new or serial
      names[named + 1], names[named + 2] = serial, user
      named = named + 2
    end
    if presence and serial > drawn_to then
      seen[seens + 1], seen[seens + 2] = now, serial
      seens = seens + 2
    end
    -- A serial taken in this call is at the back: nobody ahead of it left since.
    local position
    if first_new and serial >= first_new then
      position = serial - head + 1 - gone
    else
      position = position_of(head, serial, KEYS[3])
    end
    reply[n + 1], reply[n + 2], reply[n + 3] = 'queued', attempt == sent and '' or attempt, position
    place = serial
  end
  reply[n + 4], reply[n + 5] = last - head + 1 - gone, place
  n = n + 5
end
if first_new then
  redis.call('SET', KEYS[2], last)
  -- One write per serial bucket the new serials fall in (consecutive: one or two).
  local from = 1
  while from <= named do
    local number, to = serial_bucket_of(names[from]), from
    while names[to + 2] and serial_bucket_of(names[to + 2]) == number do
      to = to + 2
    end
    redis.call('HSET', serial_bucket(names[from]), unpack(names, from, to + 1))
    from = to + 2
  end
end
if seens > 0 then redis.call('ZADD', KEYS[6], unpack(seen)) end
return reply
