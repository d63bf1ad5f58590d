-- finish: an attempt left the active set without giving stock back (confirmed, or expired
-- before it held anything). Its units stay sold and counted against the user's limit.
-- KEYS: 1 holds, 2 active
-- ARGV: 1 attempt
redis.call('HDEL', KEYS[1], ARGV[1])
return redis.call('ZREM', KEYS[2], ARGV[1])
