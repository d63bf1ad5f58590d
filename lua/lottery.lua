-- lottery: at the opening of a lottery sale, once, everyone waiting is put in the order of
-- SHA-1 of `<seed>:<user id>` (users cannot choose their id, the seed was published in
-- advance: anyone can re-derive the order). They take the last serials handed out so far, in
-- that order; later joins come after. The line's numbering changes (a new meta.epoch): a
-- serial handed out before the draw no longer names a place.
-- KEYS: 1 meta, 2 seq, 3 gone, 4 seen
-- ARGV: 1 seed
-- Returns how many were ordered, or -1 if the draw was made already.
if redis.call('HGET', KEYS[1], 'lottery_drawn') then return -1 end
local head, last = queue_head(), last_serial(KEYS[2])
-- The signs of life by serial, read once (a call a user would be the draw's most calls).
local seen_by_serial = {}
local seen = redis.call('ZRANGE', KEYS[4], 0, -1, 'WITHSCORES')
for i = 1, #seen, 2 do seen_by_serial[seen[i]] = seen[i + 1] end
-- Each waiting user's draw key: SHA-1 of `<seed>:<user>` (40 hex) and the user's index, so
-- that the keys sort as plain strings (the hash decides) with no function called per
-- comparison.
local keys, users, attempts, buckets, signs = {}, {}, {}, {}, {}
for bucket = math.floor(head / SERIALS_PER_BUCKET), math.floor(last / SERIALS_PER_BUCKET) do
  local key = serial_bucket(bucket * SERIALS_PER_BUCKET)
  local entries = redis.call('HGETALL', key)
  for i = 1, #entries, 2 do
    local user = entries[i + 1]
    local user_key = user_bucket(user)
    local value = redis.call('HGET', user_key, user)
    if value then
      local n = #users + 1
      users[n], attempts[n], buckets[n] = user, parse_waiting(value), user_key
      signs[n] = seen_by_serial[entries[i]]
      keys[n] = redis.sha1hex(ARGV[1] .. ':' .. user) .. n
    end
  end
  redis.call('DEL', key)
end
table.sort(keys)
redis.call('DEL', KEYS[3], KEYS[4], BASE .. ':departed')
new_epoch()
-- The drawn take the serials from `first` to `last` in the keys' order: each user's entry
-- rewritten in place, the serial buckets written a bucket a call, the signs of life in chunks
-- (within Lua's stack for unpack).
local first = last - #keys + 1
local in_bucket, signs_args = {}, {}
for i, key in ipairs(keys) do
  local n = tonumber(string.sub(key, 41))
  local serial = first + i - 1
  redis.call('HSET', buckets[n], users[n], waiting_value(attempts[n], serial))
  in_bucket[#in_bucket + 1] = serial
  in_bucket[#in_bucket + 1] = users[n]
  if (serial + 1) % SERIALS_PER_BUCKET == 0 or i == #keys then
    redis.call('HSET', serial_bucket(serial), unpack(in_bucket))
    in_bucket = {}
  end
  if signs[n] then
    signs_args[#signs_args + 1] = signs[n]
    signs_args[#signs_args + 1] = serial
    if #signs_args >= 2000 then
      redis.call('ZADD', KEYS[4], unpack(signs_args))
      signs_args = {}
    end
  end
end
if #signs_args > 0 then redis.call('ZADD', KEYS[4], unpack(signs_args)) end
redis.call('HSET', KEYS[1], 'head', first, 'lottery_drawn', 1)
return #keys
