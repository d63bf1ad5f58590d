-- recorded: the ledger now has the admission batch that starts with ARGV[1]; forget it.
-- Only that batch: a stale admitter's late call cannot drop a newer holder's batch.
-- KEYS: 1 unrecorded
-- ARGV: first
-- REPLY: forgotten
-- Arguments: 1 the batch's first attempt
if redis.call('LINDEX', KEYS[1], 0) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
