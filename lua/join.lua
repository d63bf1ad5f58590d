-- join: put users in a sale's queue, idempotently per user. Joins that arrive together are
-- made together (src/queue/redis_batches.rs), in order, as if one after the other: a user who
-- joins twice in one call gets the same attempt twice.
-- KEYS: 1 meta (hash), 2 seq (counter), 3 gone (zset), 4 users (hash user -> admitted
--       attempt), 5 active (zset), 6 seen (zset waiting serial -> last sign of life, ms; only
--       when abandonment is on), 7 bought (hash user -> units held or bought), 8 stock, 9 sold
--       (hash attempt -> the record of what it bought), 10 owners (hash attempt -> user),
--       11 claims (hash attempt -> serial, an instant sale's claims the ledger may not have yet)
-- ARGV: presence, now_ms, front, claim_until_ms, join...: [user, attempt, bucket_key]
-- REPLY: measured_rate, configured_rate, epoch, join...: [status, attempt, position, waiting, serial]
-- Arguments: 1 '1' to track presence for abandonment, 2 now (ms, the joins'), 3 '1' when the
--       caller's ledger is behind its claims (an instant sale's line then fronts new joins),
--       4 until when a claim made here stays in the active set awaiting its record in the
--       ledger (ms), then for each join: user id, attempt id (32 hex) to use if the user has
--       no live attempt, the key of the user's bucket in a line of layout 2
--       (lib/queue.lua's user_bucket, computed by the caller; '' to compute it here)
-- Returns the sale's admission rates and the line's epoch (meta.epoch) once, then five values
--   per join, in order: status, attempt ('' when it is the one sent), position, waiting,
--   serial (0 unless queued or claimed); status is queued | active (already admitted, or
--   bought: position 0) | unknown (no such sale) | closed, and for an instant sale claimed
--   (a unit taken for the attempt, its record in the ledger to be made: also a claim made
--   before whose record may not be) | sold_out | limit (position: units the user has)
-- An instant sale (meta.instant) claims for a new user while the sale is open, nobody waits
-- and the caller's ledger keeps up: one unit taken, counted to the user, kept among the sold
-- (a refund gives it back), the attempt in the active set until the ledger has it. The claim
-- takes the next serial and the head moves past it, so the line stays empty. Otherwise the
-- user waits in line, and the admitter claims in turn (lua/admit_batch.lua).
-- One attempt per user per sale: a user whose admitted attempt bought (it left the active set
-- with units still counted to the user) gets that attempt back, not a new place in line; one
-- whose attempt expired (units given back, or none taken) joins anew.
-- (the rates, admissions per minute, give the expected wait without a second call)
-- A sale whose stock was never written here (unknown, or lost in a flush) is unknown: the
-- caller restores it from the ledger.
local meta = redis.call('HMGET', KEYS[1], 'stock_initialised', 'status', 'closes_at_ms', 'head',
  'measured_rate', 'rate_per_minute', 'epoch', 'drawing', 'draw_to', 'layout', 'instant',
  'opens_at_ms', 'per_user_limit')
local closes_at = tonumber(meta[3] or '0')
local reply, n = {meta[5] or '0', meta[6] or '0', meta[7] or ''}, 3
local now = ARGV[2]
-- A sale unknown here or closed answers every join of the call alike.
local shut = (not meta[1] and 'unknown')
  or ((meta[2] == 'closed' or (closes_at > 0 and tonumber(now) >= closes_at)) and 'closed')
local FIRST = 5
if shut then
  for _ = FIRST, #ARGV, 3 do
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
-- An instant sale claims while it is open, the caller keeps up and nobody waits (checked per
-- join below: one queued in this call fronts the rest).
local instant = meta[11] == '1'
local claiming = instant and meta[2] == 'open' and tonumber(now) >= tonumber(meta[12] or '0')
  and ARGV[3] ~= '1'
local claim_until, limit = tonumber(ARGV[4]), tonumber(meta[13] or '0')
local head_moved, claimed = false, false
-- (inline, no helper functions: a script's functions are made anew on every call)
for i = FIRST, #ARGV, 3 do
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
  local status
  if admitted then
    -- Not waiting: the place just taken is given back. A claim whose record the ledger may
    -- not have yet is answered claimed again, so the caller records it (idempotent).
    if not stale then redis.call('HDEL', bucket, user) end
    status, place = 'active', 0
    if instant then
      local pending = redis.call('HGET', KEYS[11], admitted)
      if pending then status, place = 'claimed', tonumber(pending) end
    end
    reply[n + 1], reply[n + 2], reply[n + 3] = status, admitted == sent and '' or admitted, 0
  elseif (new or stale) and claiming and last - head + 1 - gone == 0 then
    -- An instant sale's claim, for a user not waiting, with nobody waiting ahead.
    local bought = tonumber(redis.call('HGET', KEYS[7], user) or '0')
    if bought + 1 > limit then
      redis.call('HDEL', bucket, user)
      status, place = 'limit', bought
    elseif tonumber(redis.call('GET', KEYS[8]) or '0') < 1 then
      redis.call('HDEL', bucket, user)
      status, place = 'sold_out', 0
    else
      -- Nobody waits: every serial from the head on is gone, and the head passes them all.
      last = last + 1
      head, gone, head_moved, claimed = last + 1, 0, true, true
      redis.call('DECRBY', KEYS[8], 1)
      redis.call('HINCRBY', KEYS[7], user, 1)
      redis.call('HSET', KEYS[9], sent, 'q|1|' .. user)
      redis.call('HSET', KEYS[4], user, sent)
      redis.call('HSET', KEYS[10], sent, user)
      redis.call('ZADD', KEYS[5], claim_until, sent)
      redis.call('HSET', KEYS[11], sent, last)
      if keeps_admitted() then
        redis.call('HSET', bucket, user, sent)
      else
        redis.call('HDEL', bucket, user)
      end
      status, place = 'claimed', last
    end
    reply[n + 1], reply[n + 2], reply[n + 3] = status, '', status == 'limit' and place or 0
    if status == 'limit' then place = 0 end
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
if head_moved then
  -- Claims took serials and nobody waits: the head passes them (and those gone before).
  redis.call('HSET', KEYS[1], 'head', head)
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. head)
end
if claimed then
  redis.call('HINCRBY', KEYS[1], 'version', 1)
  if not first_new then redis.call('SET', KEYS[2], last) end
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
