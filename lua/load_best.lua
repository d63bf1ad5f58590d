-- load_best: put a sale's blocks of one category (or of all, '') into `best` for
-- lua/hold_best.lua, unless they are there already (a sale's layout never changes, so two
-- replicas loading at once load the same). The blocks come from the layout the ledger has.
-- KEYS: 1 best
-- ARGV: category, blocks...
-- REPLY: loaded
-- Arguments: 1 category ('' every category), then each block as hold_best.lua reads it,
--       nearest the stage first
-- Returns 1 if loaded now, 0 if they were there.
if redis.call('HEXISTS', KEYS[1], 'n:' .. ARGV[1]) == 1 then return 0 end
for i = 2, #ARGV do
  redis.call('HSET', KEYS[1], (i - 1) .. ':' .. ARGV[1], ARGV[i])
end
redis.call('HSET', KEYS[1], 'n:' .. ARGV[1], #ARGV - 1)
return 1
