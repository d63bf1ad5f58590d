-- An instant sale's join is the claim: one unit, CONFIRMED at once (QUEUED → CONFIRMED).
ALTER TABLE sales ADD COLUMN instant BOOLEAN NOT NULL DEFAULT 0;
-- A claim looks up whether its user has claimed before (the ledger's guard of one claim per
-- user, whatever the queue store lost); support finds a sale's attempts by user with it too.
CREATE INDEX attempts_sale_user ON attempts (sale_id, user_id);
