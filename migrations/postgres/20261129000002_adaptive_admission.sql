-- Adaptive admission: the controller moves the rate within [min, max] users per minute.
-- Both NULL: manual (the rate is rate_per_minute as the admin set it).
ALTER TABLE sales
    ADD COLUMN adaptive_min_rate INTEGER,
    ADD COLUMN adaptive_max_rate INTEGER,
    ADD CONSTRAINT sales_adaptive_bounds CHECK (
        (adaptive_min_rate IS NULL AND adaptive_max_rate IS NULL)
        OR (adaptive_min_rate > 0 AND adaptive_max_rate >= adaptive_min_rate));
