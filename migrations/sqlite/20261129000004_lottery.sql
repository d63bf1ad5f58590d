-- How a sale opens: 'fifo' (join order), or 'lottery_at_open' (everyone who joined before
-- the opening in the order of SHA-1 of `<lottery_seed>:<user id>`, then join order). The seed
-- is recorded (and shown) so anyone can re-derive the order.
ALTER TABLE sales ADD COLUMN opening TEXT NOT NULL DEFAULT 'fifo' CHECK (opening IN ('fifo', 'lottery_at_open'));
ALTER TABLE sales ADD COLUMN lottery_seed TEXT NOT NULL DEFAULT '';
