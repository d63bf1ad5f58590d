-- abandon: waiting attempts with no sign of life (no join, status poll or status stream) for
-- the given time lose their place: out of the queue, the user free to join again, and marked
-- abandoned so their status says why.
-- KEYS: 1 meta, 2 seen (zset serial -> ms), 3 gone, 4 abandoned (set), 5 left (hash
--       attempt -> user)
-- ARGV: idle_ms, limit
-- REPLY: abandoned
-- Arguments: 1 idle time (ms), 2 most to abandon in one call
-- Returns the number abandoned.
-- Not while the lottery's draw gives places out again (signs of life move with the places).
local draw = redis.call('HMGET', KEYS[1], 'drawing', 'drawn_at_ms', 'draw_took_ms')
if draw[1] then return 0 end
local now, idle_ms, head = now_ms(), tonumber(ARGV[1]), queue_head()
local cutoff = now - idle_ms
-- Signs of life could not be written while the draw was made (lua/lottery.lua): for an idle
-- time after it, its time does not count against anyone.
if draw[2] and now - tonumber(draw[2]) < idle_ms then
  cutoff = cutoff - tonumber(draw[3] or '0')
end
local idle = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', cutoff, 'LIMIT', 0, tonumber(ARGV[2]))
local n = 0
for _, member in ipairs(idle) do
  redis.call('ZREM', KEYS[2], member)
  local serial = tonumber(member)
  local user = redis.call('HGET', serial_bucket(serial), serial)
  local attempt = user and waiting_entry(user, head)
  if attempt then
    leave_queue(user, serial, KEYS[3])
    redis.call('SADD', KEYS[4], attempt)
    redis.call('HSET', KEYS[5], attempt, user)
    n = n + 1
  end
end
return n
