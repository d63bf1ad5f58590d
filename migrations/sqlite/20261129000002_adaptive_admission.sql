-- Adaptive admission: the controller moves the rate within [min, max] users per minute.
-- Both NULL: manual (the rate is rate_per_minute as the admin set it).
ALTER TABLE sales ADD COLUMN adaptive_min_rate INTEGER CHECK (adaptive_min_rate > 0);
ALTER TABLE sales ADD COLUMN adaptive_max_rate INTEGER CHECK (adaptive_max_rate > 0);
