-- The queue store's side of each committed transition that gives units back, sells them or
-- extends a hold's deadline (restore / finish / extend), written in the transition's own
-- transaction. The request applies it at once; when that fails (Redis away), the queue-sync
-- worker applies it later: no unit freed in the ledger stays taken in the queue store.
CREATE TABLE queue_sync (
    id          BIGSERIAL PRIMARY KEY,
    sale_id     UUID NOT NULL,
    attempt_id  UUID NOT NULL,
    change      TEXT NOT NULL CHECK (change IN ('restore', 'finish', 'extend')),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    applied_at  TIMESTAMPTZ
);
CREATE INDEX queue_sync_pending ON queue_sync (id) WHERE applied_at IS NULL;
