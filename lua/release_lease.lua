-- release_lease: the holder gives a sale's lease up (a draining process), so another replica
-- takes it at its next tick rather than once the lease's TTL has run out. Anyone else's lease
-- is left alone.
-- KEYS: 1 lease
-- ARGV: holder
-- REPLY: released
-- Arguments: 1 holder id
-- Returns 1 if the lease was given up, 0 if the caller did not hold it.
local current = redis.call('GET', KEYS[1])
if current then
  local _, holder = string.match(current, '^(%d+):(.*)$')
  if holder == ARGV[1] then return redis.call('DEL', KEYS[1]) end
end
return 0
