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
local ranked = {}
for bucket = math.floor(head / SERIALS_PER_BUCKET), math.floor(last / SERIALS_PER_BUCKET) do
  local key = serial_bucket(bucket * SERIALS_PER_BUCKET)
  local entries = redis.call('HGETALL', key)
  for i = 1, #entries, 2 do
    local serial, user = tonumber(entries[i]), entries[i + 1]
    local attempt = waiting_entry(user)
    if attempt then
      local seen = redis.call('ZSCORE', KEYS[4], serial)
      table.insert(ranked, {redis.sha1hex(ARGV[1] .. ':' .. user), user, attempt, seen})
      redis.call('HDEL', user_bucket(user), user)
    end
  end
  redis.call('DEL', key)
end
table.sort(ranked, function(a, b) return a[1] < b[1] end)
redis.call('DEL', KEYS[3], KEYS[4], BASE .. ':departed')
new_epoch()
local first = last - #ranked + 1
for i, entry in ipairs(ranked) do
  local serial = first + i - 1
  put_waiting(entry[2], entry[3], serial)
  if entry[4] then redis.call('ZADD', KEYS[4], entry[4], serial) end
end
redis.call('HSET', KEYS[1], 'head', first, 'lottery_drawn', 1)
return #ranked
