-- When the queue store was last recorded taking a sale's settings (store_version). The
-- queue-sync worker's replay checks that the store still has the settings it took within
-- workers.queue_sync_replay_secs: a Redis failover or restart loses the last writes.
ALTER TABLE sales ADD COLUMN store_followed_at TIMESTAMPTZ;
