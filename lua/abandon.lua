-- abandon: waiting attempts with no sign of life (no join, status poll or status stream) for
-- the given time lose their place: out of the queue, the user free to join again, and marked
-- abandoned so their status says why.
-- KEYS: 1 queue, 2 seen, 3 users, 4 owners, 5 abandoned (set)
-- ARGV: 1 idle time (ms), 2 most to abandon in one call
-- Returns the number abandoned.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local idle = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[1]),
  'LIMIT', 0, tonumber(ARGV[2]))
local n = 0
for _, attempt in ipairs(idle) do
  redis.call('ZREM', KEYS[2], attempt)
  if redis.call('ZREM', KEYS[1], attempt) == 1 then
    local user = redis.call('HGET', KEYS[4], attempt)
    if user and redis.call('HGET', KEYS[3], user) == attempt then
      redis.call('HDEL', KEYS[3], user)
    end
    redis.call('SADD', KEYS[5], attempt)
    n = n + 1
  end
end
return n
