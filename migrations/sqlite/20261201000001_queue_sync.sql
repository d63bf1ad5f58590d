-- The queue store's side of each committed transition that gives units back, sells them or
-- extends a hold's deadline (see the PostgreSQL migration of the same name).
CREATE TABLE queue_sync (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    sale_id        BLOB NOT NULL,
    attempt_id     BLOB NOT NULL,
    change         TEXT NOT NULL CHECK (change IN ('restore', 'finish', 'extend')),
    created_at_ms  INTEGER NOT NULL,
    applied_at_ms  INTEGER
);
CREATE INDEX queue_sync_pending ON queue_sync (id) WHERE applied_at_ms IS NULL;
