-- The waiting queue's layout, prepended to every script that touches the queue (so it is
-- written once). Stored densely, because a ticket opening queues millions (see
-- src/queue/mod.rs for why):
--   seq        counter: every join takes the next serial number (FIFO; never a clock)
--   meta.head  the lowest serial that may still be waiting; admission moves it forward
--   <base>:w:<serial // serials_per_bucket()>   hash serial -> user
--   <base>:u:<sha1(user) % user_buckets()>   hash user -> attempt (32 hex) .. serial while the
--              user waits (`waiting_value`); in a line of layout 2, then the admitted attempt
--              alone (no serial: `parse_waiting` reads serial 0, below every head)
--   meta.layout '2' (set when a sale's keys are first written): 32 serials a serial bucket,
--              65,536 user buckets, the serial in a user's entry as four bytes, and every
--              admitted user keeps their attempt in their bucket, so a join that finds no entry
--              there is a new user, with no look at the admitted users. A line written before
--              the field keeps 100 serials a bucket, 16,384 user buckets, decimal serials and
--              no entry for the admitted; sluice reads both
--   gone       sorted set of serials at or above head that left the queue out of turn (left,
--              abandoned): position = serials ahead - those gone ahead, without a scan
--   departed   list of the same serials in the order they left, never trimmed while the line
--              keeps its numbering: each replica's view of the line (lua/refresh.lua) takes
--              only the ones it has not seen
--   meta.epoch the line's numbering: new when the sale's keys are first written and when the
--              lottery renumbers everyone; a serial means a place only within one epoch
--   meta.drawing, draw_from, draw_to, draw_cursor, drawn, draw_started_ms, draw_seed: a
--              lottery's draw while it is made (lua/lottery.lua, with <base>:lottery,
--              :lottery_slots and :lottery_seen); meta.renumbered with <base>:renumbered,
--              drawn_at_ms and draw_took_ms: what it made, once it is
-- Small hashes are listpacks in Redis (up to hash-max-listpack-entries, 128, and values up to
-- hash-max-listpack-value, 64 bytes): ~20 bytes an entry instead of ~100 for a hash-table
-- entry. User ids up to 64 characters keep a bucket a listpack; longer ones still work, at
-- hash-table cost. 65,536 user hashes stay listpacks up to ~6M waiting in one sale; a join's
-- write into a bucket costs the more, the fuller the bucket (see docs/scaling.md).
-- Scripts that include this take KEYS[1] = meta (`<base>:meta`).
local BASE = string.sub(KEYS[1], 1, -6)
-- meta.layout's value for lines written now.
local LAYOUT = '2'

local line_layout
-- This sale's meta.layout ('1' for a line written before the field), read once a call.
local function layout()
  line_layout = line_layout or redis.call('HGET', KEYS[1], 'layout') or '1'
  return line_layout
end

-- How many serials a serial bucket holds: 32 in a line of layout 2, 100 in an older one. A
-- join's write of its new serials looks each up in the bucket first, so a smaller bucket is
-- a cheaper write.
local function serials_per_bucket()
  return layout() == LAYOUT and 32 or 100
end

-- The number of the serial bucket that holds `serial`.
local function serial_bucket_of(serial)
  return math.floor(serial / serials_per_bucket())
end

local function serial_bucket(serial)
  return BASE .. ':w:' .. serial_bucket_of(serial)
end

-- How many user buckets this sale's line has.
local function user_buckets()
  return layout() == LAYOUT and 65536 or 16384
end

-- A user's bucket: the first 20 bits of SHA-1 of the user id, modulo `user_buckets`. A join's
-- caller sends it for a line of layout 2, sparing the script the SHA-1 (src/queue/redis.rs
-- computes it the same way).
local function user_bucket(user)
  return BASE .. ':u:' .. (tonumber(string.sub(redis.sha1hex(user), 1, 5), 16) % user_buckets())
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The lowest serial that may still be waiting, from meta's `head` field (nil: none yet).
local function head_of(value)
  return tonumber(value or '1')
end

local function queue_head()
  return head_of(redis.call('HGET', KEYS[1], 'head'))
end

local function last_serial(seq_key)
  return tonumber(redis.call('GET', seq_key) or '0')
end

-- How many wait: serials from head to the last one, less those gone out of turn.
local function waiting_count(head, seq_key, gone_key)
  return last_serial(seq_key) - head + 1 - redis.call('ZCARD', gone_key)
end

-- 1-based place of a waiting serial.
local function position_of(head, serial, gone_key)
  return serial - head + 1 - redis.call('ZCOUNT', gone_key, head, serial)
end

-- A waiting user's value in their user bucket: the attempt (32 hex), then the serial: four
-- bytes, big-endian, in a line of layout 2 (no number formatted), else in decimal.
local function waiting_value(attempt, serial)
  if layout() == LAYOUT then return attempt .. struct.pack('>I4', serial) end
  return attempt .. serial
end

-- The attempt and the serial of a `waiting_value`; serial 0 for an admitted user's entry
-- (the attempt alone), below every head, so it reads as not waiting.
local function parse_waiting(value)
  if #value == 32 then return value, 0 end
  if layout() == LAYOUT then return string.sub(value, 1, 32), (struct.unpack('>I4', value, 33)) end
  return string.sub(value, 1, 32), tonumber(string.sub(value, 33))
end

-- Whether admitted users keep their attempt in their bucket (a line of meta.layout LAYOUT).
local function keeps_admitted()
  return layout() == LAYOUT
end

-- The user's waiting entry: attempt (32 hex) and serial, or nil. An entry below `head` (the
-- line's) waits no more: a closed sale let go of it (forget_waiting moves the head past
-- everyone first and deletes the entries after, a chunk a call, perhaps cut short).
local function waiting_entry(user, head)
  local value = redis.call('HGET', user_bucket(user), user)
  if not value then return nil end
  local attempt, serial = parse_waiting(value)
  if serial < head then return nil end
  return attempt, serial
end

local function put_waiting(user, attempt, serial)
  redis.call('HSET', serial_bucket(serial), serial, user)
  redis.call('HSET', user_bucket(user), user, waiting_value(attempt, serial))
end

local function drop_waiting(user, serial)
  redis.call('HDEL', serial_bucket(serial), serial)
  redis.call('HDEL', user_bucket(user), user)
end

-- A waiting user leaves out of turn (left, abandoned): their serial counts as gone.
local function leave_queue(user, serial, gone_key)
  drop_waiting(user, serial)
  redis.call('ZADD', gone_key, serial, serial)
  redis.call('RPUSH', BASE .. ':departed', serial)
end

-- The keys of the lottery's draw while it is made (lua/lottery.lua): the draw's order, the
-- places, the signs of life.
local function draw_keys()
  return BASE .. ':lottery', BASE .. ':lottery_slots', BASE .. ':lottery_seen'
end

-- A user's member of the draw's order: the draw key (40 hex), then the user, so the order's
-- set sorts by the key.
local function draw_member(seed, user)
  return redis.sha1hex(seed .. ':' .. user) .. user
end

-- Whether `user`, holding `serial`, is in the lottery's draw being made and not yet given a
-- place by it (lua/lottery.lua): the serial they hold then is of the old numbering, and may
-- already be someone else's in the new one.
local function awaits_a_drawn_place(user, serial)
  local draw = redis.call('HMGET', KEYS[1], 'drawing', 'draw_from', 'draw_to', 'draw_seed')
  if not draw[1] or not draw[4] then return false end
  if serial < tonumber(draw[2]) or serial > tonumber(draw[3]) then return false end
  return redis.call('ZSCORE', (draw_keys()), draw_member(draw[4], user)) ~= false
end

-- The draw in the making dropped: its keys and meta's fields of it.
local function drop_draw()
  redis.call('DEL', draw_keys())
  redis.call('HDEL', KEYS[1], 'drawing', 'draw_from', 'draw_to', 'draw_cursor', 'drawn',
    'draw_started_ms', 'draw_seed')
end

-- A new epoch for the line's numbering (see meta.epoch): the server's clock in µs.
local function new_epoch()
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[1], 'epoch', t[1] .. string.format('%06d', tonumber(t[2])))
end

-- Signs of life (src/service/line): the serials ARGV[first..] of waiting users who asked,
-- gathered by a replica under the line's numbering `epoch`, written into the seen set
-- (`seen_key`) at the server's time. They name places of that numbering, and while the
-- lottery's draw gives the places out again they name nobody for sure: they are written only
-- while `epoch` is the line's and no draw is being made. XX: a serial that left meanwhile is
-- not brought back.
local function write_signs_of_life(seen_key, epoch, first)
  if #ARGV < first then return end
  local line = redis.call('HMGET', KEYS[1], 'epoch', 'drawing')
  if (line[1] or '') ~= epoch or line[2] then return end
  local now = now_ms()
  -- In chunks: Lua's stack takes ~8,000 values.
  for from = first, #ARGV, 1000 do
    local args = {}
    for i = from, math.min(from + 999, #ARGV) do
      args[#args + 1] = now
      args[#args + 1] = ARGV[i]
    end
    redis.call('ZADD', seen_key, 'XX', unpack(args))
  end
end

-- Nothing is free to hold and nothing is held (so nothing can come back): 1, else 0.
local function sold_out(kind, stock_key, seats_key, holds_key)
  local free
  if kind == 'seats' then
    free = redis.call('SCARD', seats_key)
  else
    free = tonumber(redis.call('GET', stock_key) or '0')
  end
  if free <= 0 and redis.call('HLEN', holds_key) == 0 then return 1 end
  return 0
end
-- (end of the layout; the script follows)
