-- Rows applied lately, for a replay of the queue-sync log, and pruning (see the PostgreSQL
-- migration of the same name).
CREATE INDEX queue_sync_applied ON queue_sync (applied_at_ms) WHERE applied_at_ms IS NOT NULL;
