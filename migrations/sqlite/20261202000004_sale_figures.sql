-- A sale's figures over time, sampled by every replica's figures worker into one row per sale
-- and interval (the first replica's sample of an interval stands). Kept a day. Times are Unix
-- milliseconds.
CREATE TABLE sale_figures (
    sale_id          BLOB NOT NULL,
    at               INTEGER NOT NULL,
    waiting          INTEGER NOT NULL,
    active           INTEGER NOT NULL,
    -- Attempts ever admitted: the difference of two samples is the admissions between them.
    admitted_total   INTEGER NOT NULL,
    holding_units    INTEGER NOT NULL,
    paying_units     INTEGER NOT NULL,
    sold_units       INTEGER NOT NULL,
    remaining        INTEGER NOT NULL,
    rate_per_minute  REAL NOT NULL,
    -- The adaptive controller's last decision (increase, decrease, hold, stale), if it runs.
    decision         TEXT,
    PRIMARY KEY (sale_id, at)
);
