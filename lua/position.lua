-- position: where an attempt stands, for the status answer of the user who asks. Asking is a
-- sign of life: a waiting attempt's presence is refreshed (when abandonment is tracked).
-- KEYS: 1 meta, 2 seq, 3 gone, 4 owners (admitted attempt -> user), 5 active, 6 seen,
--       7 abandoned (set), 8 left (hash attempt -> user, out of the queue out of turn)
-- ARGV: 1 attempt id, 2 the asking user, 3 '1' when presence is tracked (abandonment is on)
-- Returns {owner or '' (unknown to the store, or not this user's waiting attempt), position
--          (0 = not queued), waiting, active (1/0), measured admissions per minute,
--          configured rate per minute, known (1/0: the store holds this sale), rebuilt_at_ms
--          (0 = never rebuilt), abandoned (1/0: lost its place for not showing up), the sale's
--          status ('' when unknown)}
local meta = redis.call('HMGET', KEYS[1], 'head', 'measured_rate', 'rate_per_minute',
  'stock_initialised', 'rebuilt_at_ms', 'status')
local head = head_of(meta[1])
local known = 0
if meta[4] then known = 1 end
local owner, position, active, abandoned = '', 0, 0, 0
local attempt, serial = waiting_entry(ARGV[2])
if attempt == ARGV[1] then
  -- Waiting (the hot path: a few calls), hence neither active nor abandoned.
  owner = ARGV[2]
  position = position_of(head, serial, KEYS[3])
  if ARGV[3] == '1' then redis.call('ZADD', KEYS[6], 'XX', now_ms(), serial) end
else
  owner = redis.call('HGET', KEYS[4], ARGV[1]) or redis.call('HGET', KEYS[8], ARGV[1]) or ''
  abandoned = redis.call('SISMEMBER', KEYS[7], ARGV[1])
  if redis.call('ZSCORE', KEYS[5], ARGV[1]) then active = 1 end
end
return {owner, position, waiting_count(head, KEYS[2], KEYS[3]), active, meta[2] or '0',
  meta[3] or '0', known, meta[5] or '0', abandoned, meta[6] or ''}
