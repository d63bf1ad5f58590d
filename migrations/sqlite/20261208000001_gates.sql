-- Gates: a waiting room in front of a site, fronted by a sale of the gate's own (its line);
-- the rules are kept whole as JSON.
CREATE TABLE gates (
    id          BLOB PRIMARY KEY,
    sale_id     BLOB NOT NULL UNIQUE REFERENCES sales (id),
    body        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
-- Sessions ended before their time (by the origin or an operator): every replica refuses their
-- cookie until it would have ended anyway.
CREATE TABLE gate_session_ends (
    attempt     TEXT PRIMARY KEY,
    gate_id     BLOB NOT NULL REFERENCES gates (id) ON DELETE CASCADE,
    until       INTEGER NOT NULL
);
