-- Free units are found through this index in unit order. With only (sale_id) and no order, a
-- hold's `LIMIT n` claim was planned as a sequential scan whenever the statistics guessed free
-- rows to be spread over the table (the planner assumes they are): it then read every row of
-- the older sales stored before the new sale's units, on every hold (see CLAIM_FREE_UNITS in
-- src/ledger/postgres/attempts.rs).
DROP INDEX stock_units_free;
CREATE INDEX stock_units_free ON stock_units (sale_id, unit_id) WHERE attempt_id IS NULL;
