-- lease: take or renew the right to admit for one sale (one admitter across replicas).
-- KEYS: 1 lease, 2 fence (counter)
-- ARGV: holder, ttl_ms
-- REPLY: fence
-- Arguments: 1 holder id, 2 ttl (ms)
-- Returns the fencing token (> 0) while the caller holds the lease, 0 otherwise.
-- The lease value is "<fence>:<holder>"; a new holder always gets a larger fence.
local current = redis.call('GET', KEYS[1])
if current then
  local fence, holder = string.match(current, '^(%d+):(.*)$')
  if holder == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return tonumber(fence)
  end
  return 0
end
local fence = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], fence .. ':' .. ARGV[1], 'PX', ARGV[2])
return fence
