-- unsynced: which of the given queue-sync changes the store has no record of applying (a
-- failover or a restart lost the write the ledger saw applied): those are replayed.
-- KEYS: 1 synced
-- ARGV: ids...
-- REPLY: missing...
-- Arguments: change ids
-- Returns the ids with no record.
local missing = {}
for _, id in ipairs(ARGV) do
  if not redis.call('ZSCORE', KEYS[1], id) then table.insert(missing, id) end
end
return missing
