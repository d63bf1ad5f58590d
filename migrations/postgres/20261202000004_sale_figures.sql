-- A sale's figures over time, sampled by every replica's figures worker into one row per sale
-- and interval (the first replica's sample of an interval stands). Kept a day.
CREATE TABLE sale_figures (
    sale_id          UUID NOT NULL,
    at               TIMESTAMPTZ NOT NULL,
    waiting          BIGINT NOT NULL,
    active           BIGINT NOT NULL,
    -- Attempts ever admitted: the difference of two samples is the admissions between them.
    admitted_total   BIGINT NOT NULL,
    holding_units    BIGINT NOT NULL,
    paying_units     BIGINT NOT NULL,
    sold_units       BIGINT NOT NULL,
    remaining        BIGINT NOT NULL,
    rate_per_minute  DOUBLE PRECISION NOT NULL,
    -- The adaptive controller's last decision (increase, decrease, hold, stale), if it runs.
    decision         TEXT,
    PRIMARY KEY (sale_id, at)
);
