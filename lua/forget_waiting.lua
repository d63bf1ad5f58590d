-- forget_waiting: a closed sale lets go of everyone still waiting. Their answer is EXPIRED
-- (sale_closed) from the close on and needs none of their entries, which are most of what a
-- sale keeps here (see lib/queue.lua); admitted, holding and paying attempts, the stock, the
-- seats and the lease stay, and so do the answers of those who left or lost their place before
-- (left, abandoned). The head moves past the last serial, so nobody waits from here on;
-- the caller then deletes the serial and user buckets (<base>:w:*, <base>:u:*) in chunks, so
-- that no one call holds Redis for long.
-- KEYS: 1 meta, 2 seq, 3 gone, 4 seen
-- Returns {how many were waiting, the first serial bucket to delete, the last, how many user
-- buckets there are} ({0, 0, -1, 0} when the sale is not closed, or nobody waits: nothing
-- changes then)
local meta = redis.call('HMGET', KEYS[1], 'status', 'head')
if meta[1] ~= 'closed' then return {0, 0, -1, 0} end
local head = head_of(meta[2])
local last = last_serial(KEYS[2])
if last < head then return {0, 0, -1, 0} end
local waiting = waiting_count(head, KEYS[2], KEYS[3])
redis.call('HSET', KEYS[1], 'head', last + 1)
redis.call('DEL', KEYS[3], KEYS[4])
return {waiting, math.floor(head / SERIALS_PER_BUCKET), math.floor(last / SERIALS_PER_BUCKET),
  USER_BUCKETS}
