-- claims_recorded: the ledger has these claims of an instant sale (lua/join.lua,
-- lua/admit_batch.lua): they leave the active set, and a join no longer answers them claimed.
-- KEYS: 1 meta, 2 active, 3 claims
-- ARGV: attempt...
-- REPLY: recorded
-- Arguments: the claims' attempts (32 hex)
-- Returns how many were still awaiting their record.
local recorded = 0
for i = 1, #ARGV do
  recorded = recorded + redis.call('ZREM', KEYS[2], ARGV[i])
  redis.call('HDEL', KEYS[3], ARGV[i])
end
if recorded > 0 then redis.call('HINCRBY', KEYS[1], 'version', 1) end
return recorded
