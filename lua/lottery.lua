-- lottery: at the opening of a lottery sale (or of a lottery phase: those who joined from
-- ARGV[3] on), once, everyone waiting is put in the order of
-- SHA-1 of `<seed>:<user id>` (users cannot choose their id, the seed was published in
-- advance: anyone can re-derive the order); later joins come after. The drawn keep the places
-- they hold between them (the serials of the line as it stood at the opening, less those gone
-- out of turn), given out again in the draw's order, so the counts, the departures and the
-- serials of later joins stay as they are. The line's numbering changes (a new meta.epoch): a
-- serial handed out before the draw no longer names the same user. What each drawn serial
-- became is kept (<base>:renumbered, 4 bytes a serial of the drawn range: the new serial's
-- distance from the range's first, plus one; 0 for a serial nobody held; meta.renumbered says
-- "<old epoch> <new epoch> <first> <last>"), so that each replica's view of the line learns the
-- draw in a few reads and answers the queue tickets of before it with no lookup a user
-- (src/service/line).
--
-- One step a call, each a bounded piece of work, so that no call holds Redis for long however
-- many wait; the caller calls again until the draw is made. Meanwhile nobody is admitted or
-- abandoned (their scripts look at meta.drawing); joins, leaves and the status of everyone go
-- on, but no sign of life is written (the reaper does not count the draw's time afterwards:
-- meta.drawn_at_ms, meta.draw_took_ms). One who leaves once the scan has taken them and
-- before their place is given loses only their entry (lua/leave.lua, by meta.draw_seed): the
-- place step lets the place it gives them go, out of turn.
--   start  the line's range (draw_from .. draw_to) is fixed;
--   scan   a chunk of its serial buckets a call: each waiting user goes into <base>:lottery
--          (a sorted set whose members, all of score 0, sort as the user's draw key), their
--          place into <base>:lottery_slots (ascending), their sign of life into
--          <base>:lottery_seen;
--   place  a chunk a call: the next users in the draw's order take the next places, their
--          entries and signs of life rewritten, each one's old serial mapped to its new one in
--          <base>:renumbered; the last one ends the draw.
-- KEYS: 1 meta, 2 seq, 3 gone, 4 seen
-- ARGV: seed, chunk, from
-- REPLY: drawn
-- Arguments: 1 seed, 2 how many serials (scan) or users (place) a call takes, 3 the first
--       serial the draw orders (0: the whole line); meta.lottery_drawn keeps the last draw's
--       from + 1, so each draw is made once
-- Returns -1 if the draw was made before (or the sale closed), -2 while it is being made, or
-- how many were ordered when this call made it.
local order, slots_key, signs = draw_keys()
local renumbered = BASE .. ':renumbered'
local state = redis.call('HMGET', KEYS[1], 'lottery_drawn', 'status', 'drawing', 'draw_from',
  'draw_to', 'draw_cursor')
local wanted_from = tonumber(ARGV[3] or '0')
if state[1] and tonumber(state[1]) >= wanted_from + 1 then return -1 end
if state[2] == 'closed' then
  -- Closed during the draw: nobody waits any more (forget_waiting), nothing to order.
  drop_draw()
  return -1
end
local chunk = tonumber(ARGV[2])

if not state[3] then
  local head, last = math.max(queue_head(), wanted_from), last_serial(KEYS[2])
  redis.call('DEL', order, slots_key, signs, renumbered)
  redis.call('HSET', KEYS[1], 'drawing', 'scan', 'draw_from', head, 'draw_to', last,
    'draw_cursor', serial_bucket_of(head), 'drawn', 0, 'draw_started_ms', now_ms(),
    'draw_seed', ARGV[1])
  return -2
end

local from, to = tonumber(state[4]), tonumber(state[5])
if state[3] == 'scan' then
  local cursor = tonumber(state[6])
  local last_bucket = serial_bucket_of(to)
  local stop = math.min(cursor + math.max(1, math.floor(chunk / serials_per_bucket())) - 1,
    last_bucket)
  for bucket = cursor, stop do
    local entries = redis.call('HGETALL', serial_bucket(bucket * serials_per_bucket()))
    local slots, keys, sign_args = {}, {}, {}
    for i = 1, #entries, 2 do
      local slot = tonumber(entries[i])
      if slot >= from and slot <= to then
        local user = entries[i + 1]
        slots[#slots + 1] = slot
        keys[#keys + 1] = 0
        keys[#keys + 1] = draw_member(ARGV[1], user)
        local sign = redis.call('ZSCORE', KEYS[4], slot)
        if sign then
          sign_args[#sign_args + 1] = user
          sign_args[#sign_args + 1] = sign
        end
      end
    end
    if #slots > 0 then
      table.sort(slots)
      redis.call('RPUSH', slots_key, unpack(slots))
      redis.call('ZADD', order, unpack(keys))
    end
    if #sign_args > 0 then redis.call('HSET', signs, unpack(sign_args)) end
  end
  if stop >= last_bucket then
    redis.call('HSET', KEYS[1], 'drawing', 'place')
  else
    redis.call('HSET', KEYS[1], 'draw_cursor', stop + 1)
  end
  return -2
end

-- place: the i-th user in the draw's order takes the i-th place.
local drawn = redis.call('ZPOPMIN', order, chunk)
local n = #drawn / 2
local in_bucket = {}
if n > 0 then
  local slots = redis.call('LPOP', slots_key, n)
  for i = 1, n do
    local user, slot = string.sub(drawn[2 * i - 1], 41), tonumber(slots[i])
    local user_key = user_bucket(user)
    local value = redis.call('HGET', user_key, user)
    local bucket = serial_bucket(slot)
    if value then
      local attempt, old = parse_waiting(value)
      redis.call('HSET', user_key, user, waiting_value(attempt, slot))
      if old >= from and old <= to then
        redis.call('SETRANGE', renumbered, 4 * (old - from), struct.pack('>I4', slot - from + 1))
      end
      in_bucket[bucket] = in_bucket[bucket] or {}
      table.insert(in_bucket[bucket], slot)
      table.insert(in_bucket[bucket], user)
      local sign = redis.call('HGET', signs, user)
      if sign then
        redis.call('ZADD', KEYS[4], sign, slot)
      else
        redis.call('ZREM', KEYS[4], slot)
      end
    else
      -- No longer waiting (left during the draw): the place is gone out of turn.
      redis.call('HDEL', bucket, slot)
      redis.call('ZREM', KEYS[4], slot)
      redis.call('ZADD', KEYS[3], slot, slot)
      redis.call('RPUSH', BASE .. ':departed', slot)
    end
  end
  for bucket, args in pairs(in_bucket) do redis.call('HSET', bucket, unpack(args)) end
end
local total = redis.call('HINCRBY', KEYS[1], 'drawn', n)
if redis.call('ZCARD', order) > 0 then return -2 end
local started = tonumber(redis.call('HGET', KEYS[1], 'draw_started_ms') or '0')
drop_draw()
local before = redis.call('HGET', KEYS[1], 'epoch') or ''
new_epoch()
-- No sign of life was written meanwhile: the abandonment reaper does not count its time.
local now = now_ms()
redis.call('HSET', KEYS[1], 'lottery_drawn', wanted_from + 1, 'renumbered',
  before .. ' ' .. redis.call('HGET', KEYS[1], 'epoch') .. ' ' .. from .. ' ' .. to,
  'drawn_at_ms', now, 'draw_took_ms', now - started)
return total
