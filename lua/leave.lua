-- leave: take a waiting attempt out of the queue.
-- KEYS: 1 queue, 2 users, 3 owners, 4 seen
-- ARGV: 1 attempt id, 2 user id
-- Returns 'left' | 'not_queued' | 'not_found' (no such attempt for this user)
if redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] then return 'not_found' end
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('ZREM', KEYS[4], ARGV[1])
  if redis.call('HGET', KEYS[2], ARGV[2]) == ARGV[1] then
    redis.call('HDEL', KEYS[2], ARGV[2])
  end
  return 'left'
end
return 'not_queued'
