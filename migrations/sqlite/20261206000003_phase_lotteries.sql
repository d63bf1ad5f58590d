-- A later phase opened by lottery: its seed and when its pre-queue opens; and whether a
-- phase's settings took effect (a lottery phase's joins begin before it starts).
ALTER TABLE sale_phases ADD COLUMN lottery_seed TEXT;
ALTER TABLE sale_phases ADD COLUMN joins_from INTEGER;
ALTER TABLE sale_phases ADD COLUMN applied BOOLEAN NOT NULL DEFAULT false;
UPDATE sale_phases SET applied = true WHERE first_serial IS NOT NULL;
