-- A quantity sale's free units are one counter, not a row per unit: taking units is one
-- conditional update of one row, as cheap at the first unit sold as at the last, and a sale
-- of a million units is made with one row, not a million. Named seats keep a row each in
-- stock_units: a seat is claimed by its id.
CREATE TABLE quantity_stock (
    sale_id  BLOB PRIMARY KEY REFERENCES sales (id),
    free     INTEGER NOT NULL CHECK (free >= 0)
);
INSERT INTO quantity_stock (sale_id, free)
SELECT s.id, (SELECT count(*) FROM stock_units u WHERE u.sale_id = s.id AND u.attempt_id IS NULL)
FROM sales s WHERE s.stock_kind = 'quantity';
DELETE FROM stock_units WHERE sale_id IN (SELECT id FROM sales WHERE stock_kind = 'quantity');
