-- Gates: a waiting room in front of a site, fronted by a sale of the gate's own (its line);
-- the rules are kept whole as JSON.
CREATE TABLE gates (
    id          UUID PRIMARY KEY,
    sale_id     UUID NOT NULL UNIQUE REFERENCES sales (id),
    body        JSONB NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- Sessions ended before their time (by the origin or an operator): every replica refuses their
-- cookie until it would have ended anyway.
CREATE TABLE gate_session_ends (
    attempt     TEXT PRIMARY KEY,
    gate_id     UUID NOT NULL REFERENCES gates (id) ON DELETE CASCADE,
    until       TIMESTAMPTZ NOT NULL
);
