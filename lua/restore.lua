-- restore: give an attempt's held units or seats back and free its active slot — or, with a
-- deadline, keep the slot until then (a hold the ledger could not take: still admitted).
-- Idempotent: the hold record is deleted in the same step, so stock comes back at most once.
-- KEYS: 1 holds, 2 stock, 3 seats, 4 bought, 5 active
-- ARGV: 1 attempt, 2 keep the slot until (ms), or '' to free it
-- Returns 1 if stock was given back, 0 if there was no hold.
if ARGV[2] == '' then
  redis.call('ZREM', KEYS[5], ARGV[1])
else
  redis.call('ZADD', KEYS[5], 'XX', tonumber(ARGV[2]), ARGV[1])
end
local record = redis.call('HGET', KEYS[1], ARGV[1])
if not record then return 0 end
local kind, payload, user = string.match(record, '^(%a)|([^|]*)|(.*)$')
local units = 0
if kind == 'q' then
  units = tonumber(payload)
  redis.call('INCRBY', KEYS[2], units)
else
  for seat in string.gmatch(payload, '[^,]+') do
    redis.call('SADD', KEYS[3], seat)
    units = units + 1
  end
end
redis.call('HINCRBY', KEYS[4], user, -units)
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
