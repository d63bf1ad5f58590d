-- The version of a sale's settings the queue store has taken (see the PostgreSQL migration of
-- the same name).
ALTER TABLE sales ADD COLUMN settings_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sales ADD COLUMN store_version INTEGER NOT NULL DEFAULT 0;
CREATE INDEX sales_store_behind ON sales (id) WHERE store_version < settings_version;
