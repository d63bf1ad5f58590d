-- The seeds' coupon claim, the design they recommend, for scripts/bench's "a coupon drop"
-- (measured alone on the same Redis as sluice): one script decides each claim — dedupe per
-- user, decrement, close the event at zero, write the outbox entry (a stream) — and all
-- after the answer runs behind the message queue. Nothing is durable before the answer but
-- Redis's memory.
-- KEYS: 1 claimed (set of users), 2 stock (counter), 3 closed (flag), 4 outbox (stream)
-- ARGV: 1 user, 2 the coupon event's id
if redis.call('EXISTS', KEYS[3]) == 1 then return 'closed' end
if redis.call('SADD', KEYS[1], ARGV[1]) == 0 then return 'duplicate' end
local left = redis.call('DECR', KEYS[2])
if left < 0 then
  redis.call('SREM', KEYS[1], ARGV[1])
  redis.call('SET', KEYS[3], '1')
  return 'sold_out'
end
if left == 0 then redis.call('SET', KEYS[3], '1') end
redis.call('XADD', KEYS[4], '*', 'user', ARGV[1], 'event', ARGV[2])
return 'claimed'
