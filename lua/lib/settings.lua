-- A sale's settings in its meta hash, tagged with the ledger's version of them
-- (`sales.settings_version`), prepended to the scripts that write them (so it is written once).
-- A write of an older version than the hash holds is left out: of two changes whose writes to
-- the store cross (two replicas, or a replica and the queue-sync worker), the later stands,
-- whatever order the writes arrive in. A hash without a version (a sale whose keys were lost)
-- takes any; a forced write (the ledger's settings stand, whatever the hash holds) too.
-- ARGV from `at`: version, status, opens_at ms, closes_at ms (0 = none), max_active,
--   per_user_limit, rate_per_minute, kind, hold_ttl_ms, payment_ttl_ms, instant ('1': a
--   join claims, see lua/join.lua).

local SETTINGS_ARGS = 11

-- Writes the settings unless the hash has a later version and `forced` is false; the version
-- the hash holds after.
local function write_settings(meta, at, forced)
  local held = tonumber(redis.call('HGET', meta, 'settings_version') or '0')
  if not forced and tonumber(ARGV[at]) < held then return held end
  redis.call('HSET', meta, 'settings_version', ARGV[at], 'status', ARGV[at + 1],
    'opens_at_ms', ARGV[at + 2], 'closes_at_ms', ARGV[at + 3], 'max_active', ARGV[at + 4],
    'per_user_limit', ARGV[at + 5], 'rate_per_minute', ARGV[at + 6], 'kind', ARGV[at + 7],
    'hold_ttl_ms', ARGV[at + 8], 'payment_ttl_ms', ARGV[at + 9], 'instant', ARGV[at + 10])
  return tonumber(ARGV[at])
end
