-- unadmit: undo admit_batch for attempts the ledger could not record; they go back to their
-- place (same serial) at the head of the queue, and are no longer a batch to record. An
-- instant sale's claims give their unit back.
-- KEYS: 1 meta, 2 seq, 3 gone, 4 active, 5 unrecorded, 6 stock, 7 bought, 8 sold
-- ARGV: admitted...: [attempt, serial, user]
-- REPLY: unadmitted
-- Arguments: attempt1, serial1, user1, attempt2, serial2, user2, ...
local head = queue_head()
local back = {}
local lowest = head
for i = 1, #ARGV, 3 do
  local attempt, serial, user = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  redis.call('ZREM', KEYS[4], attempt)
  if redis.call('HDEL', KEYS[8], attempt) == 1 then
    redis.call('INCRBY', KEYS[6], 1)
    redis.call('HINCRBY', KEYS[7], user, -1)
  end
  put_waiting(user, attempt, serial)
  back[serial] = true
  lowest = math.min(lowest, serial)
end
-- The serials between the new head and the old one that are not back were gone out of turn
-- (admission stepped over them): count them as gone again, so positions stay exact.
for serial = lowest, head - 1 do
  if not back[serial] and redis.call('HEXISTS', serial_bucket(serial), serial) == 0 then
    redis.call('ZADD', KEYS[3], serial, serial)
  end
end
redis.call('HSET', KEYS[1], 'head', lowest)
redis.call('DEL', KEYS[5])
redis.call('HINCRBY', KEYS[1], 'version', 1)
return #ARGV / 3
