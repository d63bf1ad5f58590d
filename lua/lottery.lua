-- lottery: at the opening of a lottery sale, once, everyone waiting is put in the order of
-- SHA-1 of `<seed>:<user id>` (users cannot choose their id, the seed was published in
-- advance: anyone can re-derive the order). Later joins come after, in join order: their
-- sequence numbers are above every rank given here.
-- KEYS: 1 meta, 2 queue, 3 owners
-- ARGV: 1 seed
-- Returns how many were ordered, or -1 if the draw was made already.
if redis.call('HGET', KEYS[1], 'lottery_drawn') then return -1 end
local members = redis.call('ZRANGE', KEYS[2], 0, -1)
local ranked = {}
for i, attempt in ipairs(members) do
  local user = redis.call('HGET', KEYS[3], attempt) or ''
  ranked[i] = {redis.sha1hex(ARGV[1] .. ':' .. user), attempt}
end
table.sort(ranked, function(a, b) return a[1] < b[1] end)
for i, entry in ipairs(ranked) do
  redis.call('ZADD', KEYS[2], i, entry[2])
end
redis.call('HSET', KEYS[1], 'lottery_drawn', 1)
return #ranked
