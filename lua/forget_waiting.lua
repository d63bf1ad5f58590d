-- forget_waiting: a closed sale lets go of everyone still waiting. Their answer is EXPIRED
-- (sale_closed) from the close on and needs none of their entries, which are most of what a
-- sale keeps here (see lib/queue.lua); admitted, holding and paying attempts, the stock, the
-- seats and the lease stay, and so do the answers of those who left or lost their place before
-- (left, abandoned). The head moves past the last serial, so nobody waits from here on, and
-- meta.forgotten_from keeps where it was; the caller then deletes the serial and user buckets
-- (<base>:w:*, <base>:u:*) in chunks, so that no one call holds Redis for long. A later call
-- counts nobody and names the same buckets again, so a deletion cut short is finished then.
-- KEYS: 1 meta, 2 seq, 3 gone, 4 seen
-- ARGV: none
-- REPLY: waiting, first_bucket, last_bucket, user_buckets
-- Returns {how many were waiting, the first serial bucket to delete, the last, how many user
-- buckets there are} ({0, 0, -1, 0} when the sale is not closed or nobody waited at the close:
-- nothing to delete)
local meta = redis.call('HMGET', KEYS[1], 'status', 'head', 'forgotten_from')
if meta[1] ~= 'closed' then return {0, 0, -1, 0} end
local head = head_of(meta[2])
local last = last_serial(KEYS[2])
local from = tonumber(meta[3] or head)
if last < from then return {0, 0, -1, 0} end
local waiting = 0
if last >= head then
  waiting = waiting_count(head, KEYS[2], KEYS[3])
  redis.call('HSET', KEYS[1], 'head', last + 1, 'forgotten_from', from)
  redis.call('DEL', KEYS[3], KEYS[4], BASE .. ':departed', BASE .. ':renumbered')
  redis.call('HDEL', KEYS[1], 'renumbered')
end
-- A lottery's draw cut short by the close ends here (lua/lottery.lua).
drop_draw()
return {waiting, serial_bucket_of(from), serial_bucket_of(last),
  user_buckets()}
