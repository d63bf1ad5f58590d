-- unadmit: undo admit_batch for attempts the ledger could not record; they go back to their
-- place (same sequence number) at the head of the queue, and are no longer a batch to record.
-- KEYS: 1 queue, 2 active, 3 unrecorded
-- ARGV: attempt1, seq1, attempt2, seq2, ...
for i = 1, #ARGV, 2 do
  redis.call('ZREM', KEYS[2], ARGV[i])
  redis.call('ZADD', KEYS[1], ARGV[i + 1], ARGV[i])
end
redis.call('DEL', KEYS[3])
return #ARGV / 2
