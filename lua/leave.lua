-- leave: take a waiting attempt out of the queue.
-- KEYS: 1 meta, 2 gone, 3 seen, 4 owners, 5 left (hash attempt -> user)
-- ARGV: attempt, user
-- REPLY: outcome
-- Arguments: 1 attempt id, 2 user id
-- Returns 'left' | 'not_queued' | 'not_found' (no such attempt for this user)
local attempt, serial = waiting_entry(ARGV[2], queue_head())
if attempt == ARGV[1] then
  if awaits_a_drawn_place(ARGV[2], serial) then
    -- The draw has them in its order and their serial is of the old numbering, perhaps
    -- someone else's place (and sign of life) by now: only their entry goes; the place the
    -- draw gives them is let go as it is given (lua/lottery.lua).
    redis.call('HDEL', user_bucket(ARGV[2]), ARGV[2])
  else
    leave_queue(ARGV[2], serial, KEYS[2])
    redis.call('ZREM', KEYS[3], serial)
  end
  redis.call('HSET', KEYS[5], ARGV[1], ARGV[2])
  return 'left'
end
if redis.call('HGET', KEYS[4], ARGV[1]) == ARGV[2] or redis.call('HGET', KEYS[5], ARGV[1]) == ARGV[2] then
  return 'not_queued'
end
return 'not_found'
