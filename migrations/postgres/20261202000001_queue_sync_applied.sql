-- Rows applied lately are what a replay of the queue-sync log checks the queue store still
-- has (a failover can lose a write the ledger saw applied); rows applied long ago are pruned.
CREATE INDEX queue_sync_applied ON queue_sync (applied_at) WHERE applied_at IS NOT NULL;
