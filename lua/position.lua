-- position: where attempts of one sale stand, for the status answers of the users who ask.
-- Status lookups that arrive together are asked together (src/queue/redis_batches.rs): the sale's
-- figures are read once for all of them. Asking is a sign of life: a waiting attempt's presence
-- is refreshed (when abandonment is tracked).
-- KEYS: 1 meta, 2 seq, 3 gone, 4 owners (admitted attempt -> user), 5 active, 6 seen,
--       7 abandoned (set), 8 left (hash attempt -> user, out of the queue out of turn),
--       9 stock (counter), 10 seats (set of free seats), 11 holds (hash attempt -> take)
-- ARGV: presence, lookup...: [attempt, user]
-- REPLY: waiting, measured_rate, configured_rate, known, rebuilt_at_ms, status, sold_out, epoch, lookup...: [owner, position, active, abandoned, serial]
-- Arguments: 1 '1' when presence is tracked (abandonment is on), then for each lookup: attempt id,
--       the asking user
-- Returns the sale's {waiting, measured admissions per minute, configured rate per minute,
--          known (1/0: the store holds this sale), rebuilt_at_ms (0 = never rebuilt), the
--          sale's status ('' when unknown), sold out (1/0: nothing free, nothing held that
--          could come back), the line's epoch}, followed by five values per lookup, in order:
--          owner or '' (unknown to the store, or not this user's waiting attempt), position
--          (0 = not queued), active (1/0), abandoned (1/0: lost its place for not showing up),
--          serial (0 = not queued)
local meta = redis.call('HMGET', KEYS[1], 'head', 'measured_rate', 'rate_per_minute',
  'stock_initialised', 'rebuilt_at_ms', 'status', 'kind', 'epoch')
local head = head_of(meta[1])
local known, empty = 0, 0
if meta[4] then
  known = 1
  empty = sold_out(meta[7], KEYS[9], KEYS[10], KEYS[11])
end
local reply = {waiting_count(head, KEYS[2], KEYS[3]), meta[2] or '0', meta[3] or '0', known,
  meta[5] or '0', meta[6] or '', empty, meta[8] or ''}
local now
-- No sign of life while the lottery's draw gives the places out again: a serial may name
-- another user by now (lua/lottery.lua).
local presence = ARGV[1] == '1' and redis.call('HEXISTS', KEYS[1], 'drawing') == 0
for i = 2, #ARGV, 2 do
  local id, user = ARGV[i], ARGV[i + 1]
  local owner, position, active, abandoned, place = '', 0, 0, 0, 0
  local attempt, serial = waiting_entry(user, head)
  if attempt == id then
    place = serial
    -- Waiting (the hot path: a few calls), hence neither active nor abandoned.
    owner = user
    position = position_of(head, serial, KEYS[3])
    if presence then
      now = now or now_ms()
      redis.call('ZADD', KEYS[6], 'XX', now, serial)
    end
  else
    owner = redis.call('HGET', KEYS[4], id) or redis.call('HGET', KEYS[8], id) or ''
    abandoned = redis.call('SISMEMBER', KEYS[7], id)
    if redis.call('ZSCORE', KEYS[5], id) then active = 1 end
  end
  reply[#reply + 1] = owner
  reply[#reply + 1] = position
  reply[#reply + 1] = active
  reply[#reply + 1] = abandoned
  reply[#reply + 1] = place
end
return reply
