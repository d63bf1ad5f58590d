-- Proof of work on join: leading zero bits a join's hash needs (0 = off), and the salt
-- published with the offer (new at each change, so work done in advance is lost).
ALTER TABLE sales
    ADD COLUMN pow_bits INTEGER NOT NULL DEFAULT 0 CHECK (pow_bits BETWEEN 0 AND 32),
    ADD COLUMN pow_salt TEXT NOT NULL DEFAULT '';
