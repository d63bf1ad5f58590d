-- The queue store follows a sale's settings (status, admission, name and end to joins) as the
-- ledger has them. Every change bumps settings_version in its own transaction; store_version is
-- the last version the queue store is known to have taken. A sale whose store_version is
-- behind (the store was away when it changed, or the process died in between) is brought in
-- line by the queue-sync worker (service::sales::follow_in_queue).
ALTER TABLE sales ADD COLUMN settings_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sales ADD COLUMN store_version BIGINT NOT NULL DEFAULT 0;
CREATE INDEX sales_store_behind ON sales (id) WHERE store_version < settings_version;
