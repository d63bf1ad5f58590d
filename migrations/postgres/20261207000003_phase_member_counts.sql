-- How many user ids each list phase holds, kept with the phase: the version of the list a
-- replica keeps in memory to let members in without reading the ledger on each join.
ALTER TABLE sale_phases ADD COLUMN members BIGINT NOT NULL DEFAULT 0;
UPDATE sale_phases p SET members = (SELECT count(*) FROM phase_members m
                                     WHERE m.sale_id = p.sale_id AND m.position = p.position);
