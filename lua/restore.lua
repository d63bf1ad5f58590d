-- restore: give an attempt's held units or seats back and free its active slot — or, with a
-- deadline, keep the slot until then (a hold the ledger could not take: still admitted).
-- KEYS: as lua/lib/changes.lua
-- ARGV: attempt, keep_slot_until_ms
-- REPLY: restored
-- Arguments: 1 attempt, 2 keep the slot until (ms), or '' to free it
-- Returns 1 if stock was given back, 0 if there was no hold.
return restore_attempt(ARGV[1], ARGV[2])
