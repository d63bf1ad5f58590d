-- apply_sync: apply one change of the ledger's queue-sync log, once. `synced` records the
-- ids of the changes applied (sorted set: id -> when, ms), in the same step as the change, so
-- a retry, or a replay of the log after a failover, applies a change the store has no record
-- of and skips one it has; records older than the keep time go as new ones come.
-- KEYS: as lua/lib/changes.lua, then 9 synced
-- ARGV: id, change, attempt, keep_ms
-- REPLY: applied
-- Arguments: 1 change id, 2 change ('restore' | 'finish' | 'extend'), 3 attempt, 4 keep records (ms)
-- Returns 1 if applied now, 0 if applied before.
if redis.call('ZSCORE', KEYS[9], ARGV[1]) then return 0 end
if ARGV[2] == 'restore' then
  restore_attempt(ARGV[3], '')
elseif ARGV[2] == 'finish' then
  finish_attempt(ARGV[3])
elseif ARGV[2] == 'extend' then
  extend_attempt(ARGV[3])
else
  return redis.error_reply('unknown queue-sync change ' .. ARGV[2])
end
local now = changes_now_ms()
redis.call('ZADD', KEYS[9], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[9], '-inf', now - tonumber(ARGV[4]))
return 1
