-- leave: take a waiting attempt out of the queue.
-- KEYS: 1 meta, 2 gone, 3 seen, 4 owners, 5 left (hash attempt -> user)
-- ARGV: 1 attempt id, 2 user id
-- Returns 'left' | 'not_queued' | 'not_found' (no such attempt for this user) | 'drawing' (one
-- of the lottery's drawn, while the draw gives their places out again: not now)
local attempt, serial = waiting_entry(ARGV[2])
if attempt == ARGV[1] then
  if drawn_now(serial) then return 'drawing' end
  leave_queue(ARGV[2], serial, KEYS[2])
  redis.call('ZREM', KEYS[3], serial)
  redis.call('HSET', KEYS[5], ARGV[1], ARGV[2])
  return 'left'
end
if redis.call('HGET', KEYS[4], ARGV[1]) == ARGV[2] or redis.call('HGET', KEYS[5], ARGV[1]) == ARGV[2] then
  return 'not_queued'
end
return 'not_found'
