-- One vocabulary for both ledgers: the columns are named as in migrations/postgres. Times stay
-- Unix milliseconds from the database's clock; the `_ms` suffix goes. SQLite rewrites the
-- indexes that name a renamed column.
ALTER TABLE sales RENAME COLUMN opens_at_ms TO opens_at;
ALTER TABLE sales RENAME COLUMN closes_at_ms TO closes_at;
ALTER TABLE sales RENAME COLUMN created_at_ms TO created_at;
ALTER TABLE attempts RENAME COLUMN admitted_at_ms TO admitted_at;
ALTER TABLE attempts RENAME COLUMN admission_expires_at_ms TO admission_expires_at;
ALTER TABLE attempts RENAME COLUMN hold_expires_at_ms TO hold_expires_at;
ALTER TABLE attempts RENAME COLUMN payment_expires_at_ms TO payment_expires_at;
ALTER TABLE attempts RENAME COLUMN updated_at_ms TO updated_at;
ALTER TABLE holds RENAME COLUMN created_at_ms TO created_at;
ALTER TABLE holds RENAME COLUMN ended_at_ms TO ended_at;
ALTER TABLE payments RENAME COLUMN created_at_ms TO created_at;
ALTER TABLE payments RENAME COLUMN updated_at_ms TO updated_at;
ALTER TABLE payment_events RENAME COLUMN received_at_ms TO received_at;
ALTER TABLE attempt_transitions RENAME COLUMN at_ms TO at;
ALTER TABLE idempotency_keys RENAME COLUMN created_at_ms TO created_at;
ALTER TABLE outbox RENAME COLUMN created_at_ms TO created_at;
ALTER TABLE outbox RENAME COLUMN published_at_ms TO published_at;
ALTER TABLE outbox RENAME COLUMN dead_at_ms TO dead_at;
ALTER TABLE queue_sync RENAME COLUMN created_at_ms TO created_at;
ALTER TABLE queue_sync RENAME COLUMN applied_at_ms TO applied_at;
