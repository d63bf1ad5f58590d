-- put_settings: a change to a sale's settings (status, admission, details), written whole as
-- the ledger has them after the change. A sale the store does not hold is left to be rebuilt
-- whole from the ledger (its first join or status, or the queue-sync worker).
-- KEYS: 1 meta
-- ARGV: settings: [version, status, opens_at_ms, closes_at_ms, max_active, per_user_limit, rate_per_minute, kind, hold_ttl_ms, payment_ttl_ms, instant], forced
-- REPLY: version
-- Arguments: the settings (lib/settings.lua), then forced (1/0).
-- Returns the version of the settings the store holds after: -1 when it does not hold the sale.
if redis.call('HEXISTS', KEYS[1], 'stock_initialised') == 0 then return -1 end
return write_settings(KEYS[1], 1, ARGV[SETTINGS_ARGS + 1] == '1')
