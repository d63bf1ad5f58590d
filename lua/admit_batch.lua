-- admit_batch: move the head of the queue to the active set, never beyond max_active.
-- The batch is also written to `unrecorded` until the admitter has recorded it in the ledger
-- (recorded.lua): if the admitter dies in between, the next lease holder gets that batch back
-- first, so nobody admitted here is missing from the ledger (skipped) or admitted twice.
-- KEYS: 1 meta, 2 queue, 3 active (zset attempt -> deadline ms), 4 owners, 5 lease, 6 seen,
--       7 unrecorded (list: attempt, seq, user, deadline, ...)
-- ARGV: 1 lease value "<fence>:<holder>" (fencing: a stale admitter admits nobody),
--       2 how many are wanted, 3 admission ttl (ms), 4 grace (ms) before a forgotten active
--       entry is dropped, 5 measured admissions per minute (for the status ETA)
-- Returns {'lease_lost'}, {'ok', attempt1, seq1, user1, deadline, attempt2, ...}, or
-- {'unrecorded', ...same...}: an earlier batch still to be recorded (nothing new admitted).
if redis.call('GET', KEYS[5]) ~= ARGV[1] then return {'lease_lost'} end
local unrecorded = redis.call('LRANGE', KEYS[7], 0, -1)
if #unrecorded > 0 then
  table.insert(unrecorded, 1, 'unrecorded')
  return unrecorded
end
-- Paused or closed since the admitter looked: admit nobody (pausing takes effect at once).
if redis.call('HGET', KEYS[1], 'status') ~= 'open' then return {'ok'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Entries whose deadline passed long ago lost their ledger row's reaper: free the slot.
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[4]))
redis.call('HSET', KEYS[1], 'measured_rate', ARGV[5])
local max_active = tonumber(redis.call('HGET', KEYS[1], 'max_active') or '0')
local free = max_active - redis.call('ZCARD', KEYS[3])
local n = math.min(tonumber(ARGV[2]), free)
local out = {'ok'}
if n <= 0 then return out end
local deadline = now + tonumber(ARGV[3])
local popped = redis.call('ZPOPMIN', KEYS[2], n)
for i = 1, #popped, 2 do
  local attempt = popped[i]
  redis.call('ZADD', KEYS[3], deadline, attempt)
  redis.call('ZREM', KEYS[6], attempt)
  table.insert(out, attempt)
  table.insert(out, popped[i + 1])
  table.insert(out, redis.call('HGET', KEYS[4], attempt) or '')
  table.insert(out, tostring(deadline))
  -- Per attempt, not one unpack of the whole batch: Lua's stack takes ~8,000 values, and a
  -- script that fails after ZPOPMIN keeps the pops.
  redis.call('RPUSH', KEYS[7], attempt, popped[i + 1], out[#out - 1], out[#out])
end
return out
