-- A sale's prices, in its currency's smallest unit (KRW: won; USD: cents). A sale with no
-- currency is not priced, and its holds have no amount.
ALTER TABLE sales ADD COLUMN currency TEXT;
ALTER TABLE sales ADD COLUMN unit_price INTEGER CHECK (unit_price >= 0);

-- A seated sale's categories (VIP, R, S), each with its price; a seat names its category in
-- stock_units (none: the sale's unit_price).
CREATE TABLE sale_categories (
    sale_id     BLOB NOT NULL REFERENCES sales (id),
    name        TEXT NOT NULL,
    unit_price  INTEGER NOT NULL CHECK (unit_price >= 0),
    -- The order the admin gave them in.
    position    INTEGER NOT NULL,
    PRIMARY KEY (sale_id, name)
);
ALTER TABLE stock_units ADD COLUMN category TEXT;

-- What a hold costs, the sum of its units' prices when it was taken (NULL: not priced).
ALTER TABLE holds ADD COLUMN amount INTEGER CHECK (amount >= 0);
ALTER TABLE holds ADD COLUMN currency TEXT;
