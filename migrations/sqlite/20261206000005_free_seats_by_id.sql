-- The free-units index carries the unit's id: a hold of named seats claims each seat by
-- (sale_id, unit_id) within it. Indexed by the sale alone, a new sale's seats (its statistics
-- not yet gathered) were claimed by reading every free unit of the sale, 50,000 for a hall.
DROP INDEX stock_units_free;
CREATE INDEX stock_units_free ON stock_units (sale_id, unit_id) WHERE attempt_id IS NULL;
