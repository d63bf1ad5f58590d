-- When the queue store was last recorded taking a sale's settings, in ms (see the PostgreSQL
-- migration of the same name).
ALTER TABLE sales ADD COLUMN store_followed_at INTEGER;
