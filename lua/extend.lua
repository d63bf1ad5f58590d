-- extend: an attempt went on to pay; its active deadline becomes now + the sale's payment TTL.
-- KEYS: 1 meta, 2 active
-- ARGV: 1 attempt
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(redis.call('HGET', KEYS[1], 'payment_ttl_ms') or '0')
return redis.call('ZADD', KEYS[2], 'XX', now + ttl, ARGV[1])
