-- admit_batch: move the head of the queue to the active set, never beyond max_active.
-- The batch is also written to `unrecorded` until the admitter has recorded it in the ledger
-- (recorded.lua): if the admitter dies in between, the next lease holder gets that batch back
-- first, so nobody admitted here is missing from the ledger (skipped) or admitted twice.
-- A change to the active set bumps meta.version (see lua/lib/changes.lua).
-- An instant sale's turn is its claim (meta.instant): each admitted takes one unit, counted
-- to the user and kept among the sold, as lua/join.lua claims; the batch is then recorded as
-- claims, and leaves the active set once the ledger has it (lua/claims_recorded.lua). With
-- nothing left to claim, nobody more is taken: those waiting stay, and see it sold out.
-- KEYS: 1 meta, 2 seq, 3 gone, 4 active (zset attempt -> deadline ms), 5 owners (attempt ->
--       user), 6 users (user -> attempt), 7 lease, 8 seen, 9 unrecorded (list: attempt,
--       serial, user, deadline, ...), 10 stock, 11 bought, 12 sold
-- ARGV: lease, wanted, admission_ttl_ms, grace_ms, measured_rate, below
-- REPLY: status, admitted...: [attempt, serial, user, deadline_ms]
-- Arguments: 1 lease value "<fence>:<holder>" (fencing: a stale admitter admits nobody),
--       2 how many are wanted, 3 admission ttl (ms), 4 grace (ms) before a forgotten active
--       entry is dropped, 5 measured admissions per minute (for the status ETA), 6 the serial
--       below which the admitted are taken (0: any; a later phase's pre-queue waits for its
--       start)
-- Returns {'lease_lost'}, {'ok', attempt1, serial1, user1, deadline, attempt2, ...}, or
-- {'unrecorded', ...same...}: an earlier batch still to be recorded (nothing new admitted).
if redis.call('GET', KEYS[7]) ~= ARGV[1] then return {'lease_lost'} end
local unrecorded = redis.call('LRANGE', KEYS[9], 0, -1)
if #unrecorded > 0 then
  table.insert(unrecorded, 1, 'unrecorded')
  return unrecorded
end
-- Paused or closed since the admitter looked: admit nobody (pausing takes effect at once).
if redis.call('HGET', KEYS[1], 'status') ~= 'open' then return {'ok'} end
-- Nor before the lottery's draw is made (lua/lottery.lua).
if redis.call('HEXISTS', KEYS[1], 'drawing') == 1 then return {'ok'} end
local now = now_ms()
-- Entries whose deadline passed long ago lost their ledger row's reaper: free the slot.
local dropped = redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now - tonumber(ARGV[4]))
if dropped > 0 then redis.call('HINCRBY', KEYS[1], 'version', 1) end
redis.call('HSET', KEYS[1], 'measured_rate', ARGV[5])
local max_active = tonumber(redis.call('HGET', KEYS[1], 'max_active') or '0')
local n = math.min(tonumber(ARGV[2]), max_active - redis.call('ZCARD', KEYS[4]))
local out = {'ok'}
if n <= 0 then return out end
local deadline = now + tonumber(ARGV[3])
local head, last = queue_head(), last_serial(KEYS[2])
local instant = redis.call('HGET', KEYS[1], 'instant') == '1'
if instant then n = math.min(n, tonumber(redis.call('GET', KEYS[10]) or '0')) end
local below = tonumber(ARGV[6] or '0')
if below > 0 then last = math.min(last, below - 1) end
-- A bucket at a time: its serials read in one call, those passed removed in one call.
while n > 0 and head <= last do
  local bucket = serial_bucket(head)
  local entries = redis.call('HGETALL', bucket)
  local users = {}
  for i = 1, #entries, 2 do users[tonumber(entries[i])] = entries[i + 1] end
  local stop = math.min((serial_bucket_of(head) + 1) * serials_per_bucket() - 1, last)
  local passed = {}
  while n > 0 and head <= stop do
    local user = users[head]
    if user then
      table.insert(passed, head)
      local user_key = user_bucket(user)
      local value = redis.call('HGET', user_key, user)
      -- (no value: the serial's user entry is gone, never so unless keys were lost: skip it)
      if value then
        local attempt = parse_waiting(value)
        -- An admitted user's entry stays, the attempt alone, where the line keeps them.
        if keeps_admitted() then
          redis.call('HSET', user_key, user, attempt)
        else
          redis.call('HDEL', user_key, user)
        end
        redis.call('ZADD', KEYS[4], deadline, attempt)
        redis.call('HSET', KEYS[5], attempt, user)
        redis.call('HSET', KEYS[6], user, attempt)
        if instant then
          redis.call('DECRBY', KEYS[10], 1)
          redis.call('HINCRBY', KEYS[11], user, 1)
          redis.call('HSET', KEYS[12], attempt, 'q|1|' .. user)
        end
        redis.call('ZREM', KEYS[8], head)
        for _, v in ipairs({attempt, tostring(head), user, tostring(deadline)}) do
          table.insert(out, v)
        end
        -- Per attempt, not one unpack of the whole batch: Lua's stack takes ~8,000 values.
        redis.call('RPUSH', KEYS[9], attempt, head, user, deadline)
        n = n - 1
      end
    end
    head = head + 1
  end
  if #passed > 0 then redis.call('HDEL', bucket, unpack(passed)) end
end
redis.call('HSET', KEYS[1], 'head', head)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. head)
if #out > 1 then redis.call('HINCRBY', KEYS[1], 'version', 1) end
return out
